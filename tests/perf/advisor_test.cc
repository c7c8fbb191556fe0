#include "loom/perf/advisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/calibration.h"
#include "loom/perf/validation_set.h"

namespace loom::perf {
namespace {

// Two GPUs of the same speed: "small" (8 GB, $500) and "big" (24 GB, $1,500).
Catalog two_gpus() {
  Catalog c = Catalog::builtin();
  c.load_text(
      "[[gpu]]\nname = \"small\"\nfp32_tflops = 20\ntensor_tflops = 0\nmemory_gb = 8\nmem_bw_gbs = "
      "500\n"
      "host_link = \"pcie4\"\npeer_link = \"none\"\ntdp_w = 200\nprice_usd = 500\nsource = "
      "\"test\"\n"
      "[[gpu]]\nname = \"big\"\nfp32_tflops = 20\ntensor_tflops = 0\nmemory_gb = 24\nmem_bw_gbs = "
      "500\n"
      "host_link = \"pcie4\"\npeer_link = \"nvlink3\"\ntdp_w = 200\nprice_usd = 1500\nsource = "
      "\"test\"\n",
      "test.toml");
  return c;
}

TEST(Advisor, AModelThatDoesNotFitEightGigabytesIsNeverPlacedThere) {
  AdviseRequest r;
  r.workload = reference_workload("bert-large");  // batch 8: ~15 GB of activations at fp32
  r.train.batch = 8;
  r.budget_usd = 20000;
  r.gpus = {"small", "big"};
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
      workload_from_config(Config::from_string("model = \"mlp\"\nmlp.hidden = [20000, 20000]\n"));
  AdviseRequest r;
  r.workload = w;
  r.train.batch = 16;
  r.train.optimizer = "sgd";
  r.codecs = {"fp32"};
  r.budget_usd = 6000;
  r.gpus_per_node = 4;
  r.inter_links = {"10gbe"};
  r.gpus = {"small", "big"};
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
      workload_from_config(Config::from_string("model = \"mlp\"\nmlp.hidden = [20000, 20000]\n"));
  r.train.batch = 16;
  r.train.optimizer = "sgd";
  r.budget_usd = 6000;
  r.gpus_per_node = 4;
  r.gpus = {"small", "big"};
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
  r.train.precision = "mixed";  // loom trains in fp32 only
  r.budget_usd = 60000;
  r.gpus = {"p100-pcie", "v100-pcie"};
  const Advice a = advise(Catalog::builtin(), r);
  ASSERT_FALSE(a.ranked.empty());
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_THAT(a.notes[0], ::testing::HasSubstr("loom trains in fp32 only"));
  EXPECT_GT(a.band, 0.0);
  EXPECT_LE(a.band, kPassMark);
  EXPECT_LE(a.typical, a.band);
  for (const auto& o : a.ranked) {
    EXPECT_EQ(o.sync.algorithm, "ring");  // loom's allreduce; it has no hierarchical one
    EXPECT_FALSE(o.est.dominant().empty());
  }
  const std::string report = advice_report(a, r);
  EXPECT_THAT(report, ::testing::HasSubstr("leave-one-out"));
  EXPECT_THAT(report, ::testing::HasSubstr("dominant term"));
  EXPECT_THAT(report, ::testing::Not(::testing::HasSubstr("mixed,")));
}

TEST(Advisor, ABudgetThatBuysNothingSaysSo) {
  AdviseRequest r;
  r.workload = reference_workload("resnet50");
  r.budget_usd = 1000;
  try {
    advise(Catalog::builtin(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a budget of $1000 buys nothing"));
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
    r.workload = workload_from_config(Config{});  // the default MLP, batch 128
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
    EXPECT_EQ(o.cost_usd, 1500.0 * o.nodes);
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
                    cat, r);
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
  try {
    advise(two_gpus(), r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nothing the budget of $20000 buys fits"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("small (8 GB): needs"));
  }
}

}  // namespace
}  // namespace loom::perf
