#include "loom/perf/advisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/calibration.h"
#include "loom/perf/validation_set.h"
#include "loom/plan/workload_reader.h"

namespace loom::perf {
namespace {

// Two GPUs of the same speed: "small" (8 GB, $500) and "big" (24 GB, $1,500, bridged in
// pairs by NVLink 3), and a $2,000 machine for up to eight of them, every card x16 PCIe 4.
Catalog two_gpus() {
  Catalog c = Catalog::builtin();
  c.load_text(
      "[[gpu]]\nname = \"small\"\nfp32_tflops = 20\ntensor_tflops = 0\nmemory_gb = 8\nmem_bw_gbs = "
      "500\n"
      "host_link = \"pcie4\"\npeer_link = \"none\"\ntdp_w = 200\nprice_usd = 500\n"
      "form_factor = \"pcie\"\nslots = 2\nsource = \"test\"\n"
      "[[gpu]]\nname = \"big\"\nfp32_tflops = 20\ntensor_tflops = 0\nmemory_gb = 24\nmem_bw_gbs = "
      "500\n"
      "host_link = \"pcie4\"\npeer_link = \"nvlink3\"\ntdp_w = 200\nprice_usd = 1500\n"
      "form_factor = \"pcie\"\nslots = 2\nsource = \"test\"\n"
      "[[host]]\nname = \"test-host\"\nkind = \"server\"\ndescription = \"test\"\n"
      "price_usd = 2000\nprice_date = \"test\"\nprice_source = \"test\"\n"
      "form_factor = \"pcie\"\ngpus_max = 8\nslots = 16\npsu_w = 4000\nhost_w = 100\n"
      "supply = \"test\"\npcie_link = \"pcie4\"\ntopology = \"test\"\n"
      "nics = [\"10gbe\"]\nsource = \"test\"\n",
      "test.toml");
  return c;
}

TEST(Advisor, AModelThatDoesNotFitEightGigabytesIsNeverPlacedThere) {
  AdviseRequest r;
  r.workload = reference_workload("bert-large");  // batch 8: ~15 GB of activations at fp32
  r.train.batch = 8;
  r.budget_usd = 20000;
  r.gpus = {"small", "big"};
  r.hosts = {"test-host"};
  Advice a = advise(two_gpus(), r);
  ASSERT_FALSE(a.ranked.empty());
  for (const auto& o : a.ranked) EXPECT_EQ(o.gpu, "big");
  ASSERT_EQ(a.not_fitting.size(), 1u);
  EXPECT_THAT(a.not_fitting[0], ::testing::HasSubstr("small (8 GB)"));
}

TEST(Advisor, ALinkBoundModelPrefersFewerFasterLinkedGpus) {
  // 400M parameters, little compute per sample: every step moves 1.6 GB of gradients.
  // $6,000 buys 4 "big" GPUs on NVLink in one host ($8,000 with the host: too much), 2 "big"
  // on NVLink ($5,000), or 8 "small" in 2 hosts of 4 on 10 GbE ($8,000: too much), 4 "small"
  // in 1 host on PCIe ($4,000). By hand (uncompressed ring; plain SGD): compute is bound by
  // memory, 3 x 1.66 GB of weights at 400 GB/s = 12.5 ms, update 416M x 12 B = 12.5 ms; the
  // NVLink pair moves 1.66 GB at 234 GB/s (7 ms), the PCIe four 2.5 GB at 25.2 GB/s (99 ms):
  // 32 / 0.032 = ~1,000 against 64 / 0.124 = ~516 samples/s, so 2 big beat 4 small. (With codecs
  // allowed, compression rescues the PCIe four: that is the advisor's codec choice, tested
  // separately.)
  Workload w =
      plan::read_workload(Config::from_string("model = \"mlp\"\nmlp.hidden = [20000, 20000]\n"));
  AdviseRequest r;
  r.workload = w;
  r.train.batch = 16;
  r.train.optimizer = "sgd";
  r.codecs = {"fp32"};
  r.budget_usd = 6000;
  r.gpus_per_node = 4;
  r.inter_links = {"10gbe"};
  r.gpus = {"small", "big"};
  r.hosts = {"test-host"};
  Advice a = advise(two_gpus(), r);
  ASSERT_FALSE(a.ranked.empty());
  EXPECT_EQ(a.ranked[0].gpu, "big");
  EXPECT_EQ(a.ranked[0].gpus, 2);
  EXPECT_EQ(a.ranked[0].intra, "nvlink3");
  bool saw_small4 = false;
  for (const auto& o : a.ranked)
    if (o.gpu == "small" && o.gpus == 4) {
      saw_small4 = true;
      EXPECT_LT(o.est.samples_per_s, 0.6 * a.ranked[0].est.samples_per_s);
      EXPECT_EQ(o.est.limiter, "link");
    }
  EXPECT_TRUE(saw_small4);
}

TEST(Advisor, CompressionIsChosenOnlyWhereItPays) {
  AdviseRequest r;
  r.workload =
      plan::read_workload(Config::from_string("model = \"mlp\"\nmlp.hidden = [20000, 20000]\n"));
  r.train.batch = 16;
  r.train.optimizer = "sgd";
  r.budget_usd = 6000;
  r.gpus_per_node = 4;
  r.gpus = {"small", "big"};
  r.hosts = {"test-host"};
  Advice a = advise(two_gpus(), r);
  for (const auto& o : a.ranked) {
    if (o.gpus == 1) {
      EXPECT_EQ(o.sync.codec, "fp32");  // nothing to send: the simplest wins
    }
    if (o.gpu == "small" && o.gpus == 4) {
      EXPECT_NE(o.sync.codec, "fp32");  // PCIe-bound
    }
  }
}

TEST(Advisor, RanksWhatLoomRunsWithTheModelsErrorBandAndTheDominantTerm) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.train.batch = 64;
  r.train.precision = "mixed";
  r.budget_usd = 60000;
  r.gpus = {"p100-pcie", "v100-pcie"};
  const Advice a = advise(Catalog::builtin(), r);
  ASSERT_FALSE(a.ranked.empty());
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_THAT(a.notes[0], ::testing::HasSubstr("precision = \"bf16\" from compute capability"));
  EXPECT_GT(a.band, 0.0);
  EXPECT_LE(a.typical, a.band);
  for (const auto& o : a.ranked) {
    // Each option's band is its generation's and precision's, and says where it comes from.
    EXPECT_GT(o.band, 0.0) << o.label();
    EXPECT_FALSE(o.band_basis.empty()) << o.label();
    // loom's allreduce: the ring, or two-level (any codec but PowerSGD) across machines of
    // several GPUs
    if (o.sync.algorithm != "ring") {
      EXPECT_EQ(o.sync.algorithm, "two-level") << o.label();
      EXPECT_NE(o.sync.codec, "powersgd") << o.label();
      EXPECT_GT(o.nodes, 1) << o.label();
      EXPECT_GT(o.gpus / o.nodes, 1) << o.label();
    }
    EXPECT_FALSE(o.est.dominant().empty());
  }
  const std::string report = advice_report(a, r, Catalog::builtin());
  EXPECT_THAT(report, ::testing::HasSubstr("leave-one-source-out"));
  EXPECT_THAT(report, ::testing::HasSubstr("dominant term"));
  EXPECT_THAT(report, ::testing::Not(::testing::HasSubstr("mixed,")));
}

// A mixed-precision request is ranked at a precision loom trains in on each GPU: bf16 from
// compute capability 8.0, fp16 (loss scaling) on 7.x where the tensor cores are faster than
// fp32 (on these three data-centre GPUs they are), fp32 without tensor cores; and a GPU
// loom's CUDA backend does not run is never recommended, bought or rented.
TEST(Advisor, MixedPrecisionIsWhatLoomRunsOnEachGpuAndOtherVendorsAreLeftOut) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.train.batch = 64;
  r.budget_usd = 200000;
  r.max_gpus = 1;
  r.gpus = {"p100-pcie", "v100-pcie", "a100-80gb-pcie", "mi300x"};
  const Catalog& cat = Catalog::builtin();
  const Advice fp32 = advise(cat, r);
  r.train.precision = "mixed";
  const Advice mixed = advise(cat, r);
  EXPECT_EQ(mixed.no_backend, std::vector<std::string>{"mi300x"});
  std::map<std::string, const AdviseOption*> at_fp32, at_mixed;
  for (const Advice* a : {&fp32, &mixed})
    for (const auto& list : {a->ranked, a->rented})
      for (const auto& o : list) EXPECT_NE(o.gpu, "mi300x") << o.label();
  for (const auto& o : fp32.ranked)
    if (o.gpus == 1 && !o.rented) at_fp32[o.gpu] = &o;
  for (const auto& o : mixed.ranked)
    if (o.gpus == 1 && !o.rented) at_mixed[o.gpu] = &o;
  const std::map<std::string, std::string> expect = {
      {"p100-pcie", "fp32"}, {"v100-pcie", "fp16"}, {"a100-80gb-pcie", "bf16"}};
  for (const auto& [gpu, precision] : expect) {
    ASSERT_TRUE(at_fp32.count(gpu) && at_mixed.count(gpu)) << gpu;
    EXPECT_EQ(at_fp32[gpu]->precision, "fp32") << gpu;
    EXPECT_EQ(at_mixed[gpu]->precision, precision) << gpu;
    if (precision == "fp32")  // no tensor cores: the same prediction
      EXPECT_DOUBLE_EQ(at_mixed[gpu]->est.samples_per_s, at_fp32[gpu]->est.samples_per_s) << gpu;
    else  // tensor cores: faster than fp32
      EXPECT_GT(at_mixed[gpu]->est.samples_per_s, 1.2 * at_fp32[gpu]->est.samples_per_s) << gpu;
  }
  const std::string report = advice_report(mixed, r, cat);
  EXPECT_THAT(report, ::testing::HasSubstr("precision = \"bf16\", sync allreduce"));
  EXPECT_THAT(report, ::testing::HasSubstr("Not considered (loom's GPU backend is CUDA): mi300x"));
  r.gpus = {"mi300x"};
  EXPECT_THROW(advise(cat, r), InputError);
}

TEST(Advisor, ABudgetThatBuysNothingSaysSo) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.budget_usd = 1000;
  try {
    advise(Catalog::builtin(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a budget of $1000 buys no valid machine"));
  }
  r.budget_usd = 1e6;
  r.inter_links = {"100gb"};
  EXPECT_THROW(advise(Catalog::builtin(), r), InputError);
}

// A calibration file as `loom bench calibrate` writes it, with round figures: 2 cores; GEMM
// `gflops` for one worker, 90 per worker with two; a += b 6 / 10 GB/s; elementwise 10 / 16
// GB/s; thread allreduce alpha 10 us, 4 GB/s; loader 50,000 samples/s.
std::string calibration_lines(double gflops) {
  const std::vector<int64_t> mlp = {784, 1024, 1024, 10};
  std::string s;
  for (const nlohmann::json& j :
       {host_line(2), gemm_line(1, 1, mlp, 128, gflops, "x"), gemm_line(2, 1, mlp, 128, 90, "x"),
        membw_line("add", 1, 64 << 20, 6), membw_line("add", 2, 64 << 20, 10),
        elementwise_line(1, mlp, 128, 10), elementwise_line(2, mlp, 128, 16),
        allreduce_line("thread", "native", 2, 1 << 20, 20 + 1048.576 / 4),
        allreduce_line("thread", "native", 2, 16 << 20, 20 + 16777.216 / 4),
        loader_line(50000, 785)})
    s += j.dump() + "\n";
  return s;
}

TEST(Advisor, CalibrationFileMakesThisMachineACandidatePredictedFromItsFigures) {
  auto advise_here = [](double gflops) {
    Catalog cat = Catalog::builtin();
    AdviseRequest r;
    r.workload = plan::read_workload(Config{});  // the default MLP, batch 128
    r.train.batch = 128;
    r.budget_usd = 5000;
    r.max_gpus = 4;
    r.gpus = {"this-machine"};
    use_calibration(parse_calibration(calibration_lines(gflops), "cal.jsonl"), cat, r, 1500);
    return advise(cat, r);
  };
  const Advice a = advise_here(100);
  // 1 and 2 workers in one $1,500 machine (2 cores), 4 workers in two machines ($3,000).
  const AdviseOption* one = nullptr;
  for (const auto& o : a.ranked) {
    EXPECT_EQ(o.gpu, "this-machine");
    EXPECT_EQ(o.capital_usd, 1500.0 * o.nodes);
    EXPECT_EQ(o.nodes, o.gpus <= 2 ? 1 : 2);
    if (o.gpus == 2) {
      EXPECT_EQ(o.intra, "this-machine-thread");
    }
    if (o.gpus == 1) one = &o;
  }
  ASSERT_NE(one, nullptr);
  // One worker by hand from the file: GEMMs at 100 GFLOP/s, the layer ops at 10 GB/s, the
  // momentum update (5 passes of 4 bytes) at 6 GB/s (the same figures as the model's test).
  const double gemm = 128 * 9564160.0 / 100e9, ew = 128 * 102600.0 / 10e9,
               upd = 1863690 * 20.0 / 6e9;
  EXPECT_NEAR(one->est.step_s, gemm + ew + upd, 1e-9);
  EXPECT_EQ(one->sync.codec, "fp32");
  // A GEMM twice as fast in the file: only the GEMM part of the prediction halves.
  int seen = 0;
  for (const auto& o : advise_here(200).ranked) {
    if (o.gpus != 1) continue;
    EXPECT_NEAR(o.est.step_s, gemm / 2 + ew + upd, 1e-9);
    ++seen;
  }
  EXPECT_EQ(seen, 1);
}

TEST(Advisor, CalibrationWithoutHostRatesIsRefused) {
  Catalog cat = Catalog::builtin();
  AdviseRequest r;
  try {
    use_calibration(parse_calibration("{\"bench\":\"codec\",\"codec\":\"onebit\",\"encode_gbs\":1,"
                                      "\"decode_gbs\":2}\n",
                                      "only_codecs.jsonl"),
                    cat, r, 1500);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("only_codecs.jsonl: no gemm and membw lines"));
  }
}

TEST(Advisor, UnknownGpuOrLinkNamesListCloseMatches) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.budget_usd = 50000;
  r.gpus = {"a100-80gb-pci"};
  try {
    advise(Catalog::builtin(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown GPU 'a100-80gb-pci'; close matches:"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a100-80gb-pcie"));
  }
  r.gpus = {};
  r.inter_links = {"100gb"};
  try {
    advise(Catalog::builtin(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown link '100gb'; close matches:"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("100gbe"));
  }
}

TEST(Advisor, NothingThatFitsSaysWhatDoesNot) {
  AdviseRequest r;
  r.workload = reference_workload("bert-large");
  r.train.batch = 8;
  r.budget_usd = 20000;
  r.gpus = {"small"};  // 8 GB: bert-large at batch 8 needs more
  r.hosts = {"test-host"};
  try {
    advise(two_gpus(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nothing the budget of $20000 buys fits"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("small (8 GB): needs"));
  }
}

// The hand-checked cases: what a buyer gets for a budget, with the machines' real prices and
// power (data/hardware/catalog.toml [[host]]), and the running cost.

bool consumer(const std::string& gpu) {
  return gpu.rfind("gtx-", 0) == 0 || gpu.rfind("rtx-", 0) == 0 || gpu.rfind("titan-", 0) == 0;
}

TEST(Advisor, FiveThousandDollarsForResnet50BuysConsumerCardsInTowersNeverAServer) {
  for (const std::string rank_by : {"time", "capital", "total"}) {
    SCOPED_TRACE(rank_by);
    AdviseRequest r;
    r.workload = reference_workload("resnet50");
    r.train.batch = r.workload.default_batch;
    r.budget_usd = 5000;
    r.rank_by = rank_by;
    const Advice a = advise(Catalog::builtin(), r);
    ASSERT_FALSE(a.ranked.empty());
    const AdviseOption& top = a.ranked.front();
    // By time, fp32 convolutions reach one FP32 datapath of an RTX 4090/5090 (gpu_roofline.h):
    // four GTX 1080 Ti in two towers come within the band of one RTX 5090.
    EXPECT_LE(top.nodes, rank_by == "time" ? 2 : 1);
    EXPECT_LE(top.gpus, rank_by == "time" ? 4 : 2);
    EXPECT_TRUE(consumer(top.gpu)) << top.gpu;
    EXPECT_TRUE(top.host_kind == "desktop" || top.host_kind == "workstation") << top.host;
    // By price: the $972 desktop with one RTX 4090 ($2,571; 450 + 200 W on an 850 W PSU).
    if (rank_by != "time") {
      EXPECT_EQ(top.host, "desktop");
      EXPECT_EQ(top.gpu, "rtx-4090");
      EXPECT_DOUBLE_EQ(top.capital_usd, 1599 + 972);
      EXPECT_DOUBLE_EQ(top.node_draw_w, 450 + 200);
    }
    for (const auto& o : a.ranked) {
      EXPECT_NE(o.host_kind, "server") << o.label();
      EXPECT_NE(o.host_kind, "baseboard") << o.label();
      EXPECT_LE(o.capital_usd, 5000) << o.label();
    }
  }
}

TEST(Advisor, EightRtx5090AreOnlyEverInTheEightGpuServerAtItsPriceAndPower) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.train.batch = r.workload.default_batch;
  r.budget_usd = 120000;
  r.gpus = {"rtx-5090"};
  const Advice a = advise(Catalog::builtin(), r);
  int eight = 0;
  for (const auto& o : a.ranked) {
    const int per_node = o.gpus / o.nodes;
    if (per_node == 8) {
      ++eight;
      EXPECT_EQ(o.host, "gpu-server-8");
      // tinybox pro v2: $50,000 with its eight cards; 8 x 575 W + 1,400 W host.
      EXPECT_DOUBLE_EQ(o.capital_usd / o.nodes, 50000);
      EXPECT_DOUBLE_EQ(o.node_draw_w, 8 * 575 + 1400);
    }
    if (o.host == "desktop") {
      ADD_FAILURE() << "a desktop cannot feed a 575 W card: " << o.label();
    }
    if (o.host == "workstation") {
      EXPECT_EQ(per_node, 1) << o.label();
    }
    if (o.host == "gpu-box-4") {
      EXPECT_LE(per_node, 4) << o.label();
    }
  }
  EXPECT_GT(eight, 0);
  // At $20,000 no machine holds eight: the server that carries them costs $34,008 alone.
  r.budget_usd = 20000;
  for (const auto& o : advise(Catalog::builtin(), r).ranked) EXPECT_LT(o.gpus / o.nodes, 8);
}

TEST(Advisor, AnSxmModuleIsNeverInAPcieHost) {
  AdviseRequest r;
  r.workload = reference_workload("bert-large");
  r.train.batch = 8;
  r.budget_usd = 2e6;
  r.max_gpus = 16;
  r.gpus = {"a100-80gb-sxm4", "h100-sxm", "b200", "l40s"};
  const Advice a = advise(Catalog::builtin(), r);
  int modules = 0;
  for (const auto& o : a.ranked) {
    const GpuSpec& g = Catalog::builtin().gpu(o.gpu);
    if (g.is_module()) {
      ++modules;
      EXPECT_EQ(o.host_kind, "baseboard") << o.label();
      EXPECT_EQ(o.host, g.baseboard) << o.label();
      EXPECT_EQ(o.gpus / o.nodes, 8) << o.label();
    } else {
      EXPECT_EQ(o.host, "gpu-server-8") << o.label();  // passively cooled L40S: servers only
    }
  }
  EXPECT_GT(modules, 0);
}

// The stated case: one GPU for ResNet-50, a GTX 1080 Ti ($699) or a Titan V ($2,999), both
// 250 W, in the $972 desktop, ranked by samples per dollar of capital and energy. The Titan V
// trains 1.52x as many samples per joule; the 1080 Ti costs 55% less. By hand, with the
// model's rates s (samples/s) and average draw W = 0.76 x 250 + 200 = 390 W:
//   value = s x 3600 x H / (capital + W x H / 1000 x price)
//   $0.1252/kWh, 1 year (8,760 h): energy $428; 1080 Ti 212 / ($1,671 + $428) beats
//     Titan V 323 / ($3,971 + $428);
//   $0.3903/kWh (Hawaii's commercial average, EIA 2023), 5 years (43,800 h): energy $6,667;
//     Titan V 323 / ($3,971 + $6,667) beats 1080 Ti 212 / ($1,671 + $6,667).
TEST(Advisor, ALongHorizonAtHighElectricityPricesMovesTheRankingToTheEfficientCard) {
  auto top = [](double usd_per_kwh, double hours) {
    AdviseRequest r;
    r.workload = reference_workload("resnet50");
    r.train.batch = r.workload.default_batch;
    r.budget_usd = 10000;
    r.max_gpus = 1;
    r.gpus = {"gtx-1080-ti", "titan-v"};
    r.hosts = {"desktop"};
    r.rank_by = "total";
    r.hours = hours;
    r.usd_per_kwh = usd_per_kwh;
    const Advice a = advise(Catalog::builtin(), r);
    EXPECT_EQ(a.ranked.size(), 2u);
    for (const auto& o : a.ranked) {
      const double energy = (0.76 * 250 + 200) / 1000 * hours * usd_per_kwh;
      EXPECT_NEAR(o.energy_usd, energy, 1e-6);
      EXPECT_NEAR(o.samples_per_usd(hours),
                  o.est.samples_per_s * 3600 * hours / (o.capital_usd + energy), 1e-6);
    }
    EXPECT_GT(a.ranked[1].est.samples_per_s, 0);
    return a.ranked;
  };
  const auto cheap = top(0.1252, 8760);
  EXPECT_EQ(cheap[0].gpu, "gtx-1080-ti");
  const auto dear = top(0.3903, 5 * 8760);
  EXPECT_EQ(dear[0].gpu, "titan-v");
  // The efficient card: more samples per joule at the same power.
  EXPECT_GT(dear[0].est.samples_per_s / dear[0].avg_w,
            1.4 * dear[1].est.samples_per_s / dear[1].avg_w);
}

TEST(Advisor, EnergyIsTdpTimesUtilisationPlusTheHostOverTheHours) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.train.batch = r.workload.default_batch;
  r.budget_usd = 3000;
  r.gpus = {"rtx-4090"};
  r.hosts = {"desktop"};
  r.hours = 1000;
  r.usd_per_kwh = 0.20;
  r.gpu_utilisation = 0.5;
  const Advice a = advise(Catalog::builtin(), r);
  ASSERT_EQ(a.ranked.size(), 1u);
  const AdviseOption& o = a.ranked[0];
  // (450 W x 0.5 + 200 W) x 1,000 h = 425 kWh; x $0.20 = $85.
  EXPECT_DOUBLE_EQ(o.avg_w, 425);
  EXPECT_DOUBLE_EQ(o.kwh, 425);
  EXPECT_DOUBLE_EQ(o.energy_usd, 85);
  EXPECT_DOUBLE_EQ(o.total_usd(), 1599 + 972 + 85);
  EXPECT_NEAR(o.hours_to_train(a.samples), 90 * 1281167 / o.est.samples_per_s / 3600, 1e-9);
  const std::string report = advice_report(a, r, Catalog::builtin());
  for (const char* part : {"plan for:", "one 120 V 15 A circuit", "BTU/h", "host RAM >= 24 GB",
                           "storage reading >=", "desktop (consumer ATX tower", "dlathome-2016",
                           "$85 at $0.2000/kWh", "capital $", "energy $", "samples/$", "train"})
    EXPECT_THAT(report, ::testing::HasSubstr(part)) << part;
}

TEST(Advisor, RentalsArePricedPerGpuHourAndABudgetThatBuysNothingNamesTheCheapestMachine) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.train.batch = r.workload.default_batch;
  r.budget_usd = 20000;
  r.hours = 100;
  const Advice a = advise(Catalog::builtin(), r);
  bool h100 = false;
  for (const auto& o : a.rented) {
    EXPECT_DOUBLE_EQ(o.capital_usd, 0);
    EXPECT_DOUBLE_EQ(o.energy_usd, 0);
    if (o.host == "h100-sxm-on-demand") {
      h100 = true;
      EXPECT_DOUBLE_EQ(o.rent_usd, 3.49 * o.gpus * 100);
    }
  }
  EXPECT_TRUE(h100);
  r.budget_usd = 1000;
  r.hours = 8760;
  try {
    advise(Catalog::builtin(), r);
    FAIL();
  } catch (const InputError& e) {
    // The cheapest GPU with a price, a $599 GTX 1080, in the $972 desktop.
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a budget of $1000 buys no valid machine: the "
                                               "cheapest that holds a GPU is 1 x gtx-1080 in a "
                                               "desktop for $1571"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("or rent 1 x"));
  }
}

}  // namespace
}  // namespace loom::perf
