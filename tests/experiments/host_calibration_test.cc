// The calibration file `loom bench calibrate` writes, read back (round trip), and the cost
// model's host path driven by such a file, checked against figures computed by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "loom/compress/onebit_codec.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/experiments/validate.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/calibration.h"
#include "loom/perf/workload.h"
#include "loom/plan/run_plan.h"
#include "loom/plan/workload_reader.h"

namespace loom::perf {
using experiments::predict_case;
namespace {

const std::vector<int64_t> kMlp = {784, 1024, 1024, 10};

// A calibration with round figures: cores 2; GEMM 100 GFLOP/s alone, 90 per worker with two
// workers; a += b 6 GB/s (1 thread), 10 GB/s (2); elementwise 10 / 16 GB/s; thread allreduce
// with alpha 10 us per ring step and 4 GB/s; loader 50,000 samples/s.
std::string hand_lines() {
  std::string s = "# a comment line the reader skips\n";
  for (const nlohmann::json& j :
       {host_line(2), gemm_line(1, 1, kMlp, 128, 100, "oneDNN"),
        gemm_line(1, 2, kMlp, 128, 160, "oneDNN"), gemm_line(2, 1, kMlp, 128, 90, "oneDNN"),
        membw_line("add", 1, 64 << 20, 6), membw_line("add", 2, 64 << 20, 10),
        membw_line("memcpy", 1, 64 << 20, 9), membw_line("add", 1, 1 << 20, 30),  // cached
        elementwise_line(1, kMlp, 128, 10), elementwise_line(2, kMlp, 128, 16),
        // 2 ranks: t = 2 alpha + S / B
        allreduce_line("thread", "native", 2, 1 << 20, 20 + 1048.576 / 4),
        allreduce_line("thread", "native", 2, 16 << 20, 20 + 16777.216 / 4),
        allreduce_line("thread", "ring", 2, 16 << 20, 1e6),  // not what training calls: skipped
        codec_line("onebit", 1863690, 2, 4), loader_line(50000, 785)})
    s += j.dump() + "\n";
  return s;
}

TEST(HostCalibration, FileRoundTrip) {
  const auto path = std::filesystem::temp_directory_path() / "loom_host_calibration_test.jsonl";
  {
    std::ofstream out(path);
    out << hand_lines();
  }
  const Calibration c = read_calibration(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(c.host.cores, 2);
  EXPECT_DOUBLE_EQ(c.host.gemm_flops.at({1, 1}), 100e9);
  EXPECT_DOUBLE_EQ(c.host.gemm_flops.at({1, 2}), 160e9);
  EXPECT_DOUBLE_EQ(c.host.gemm_flops.at({2, 1}), 90e9);
  EXPECT_DOUBLE_EQ(c.gemm_flops, 160e9);             // the device's peak: the best measured
  EXPECT_DOUBLE_EQ(c.host.stream_bytes.at(1), 6e9);  // the cached 1 MiB line is not DRAM
  EXPECT_DOUBLE_EQ(c.host.stream_bytes.at(2), 10e9);
  EXPECT_DOUBLE_EQ(c.mem_bytes_per_s, 30e9);
  EXPECT_DOUBLE_EQ(c.host.elementwise_bytes.at(2), 16e9);
  ASSERT_EQ(c.allreduce.at("thread").size(), 2u);
  const LinkFit f = Calibration::fit_ring(c.allreduce.at("thread"));
  EXPECT_NEAR(f.alpha_s, 10e-6, 1e-9);
  EXPECT_NEAR(f.bytes_per_s, 4e9, 1e3);
  EXPECT_DOUBLE_EQ(c.codec_enc_dec_gbs.at("onebit").first, 2);
  EXPECT_DOUBLE_EQ(c.codec_enc_dec_gbs.at("onebit").second, 4);
  EXPECT_DOUBLE_EQ(c.loader_samples_per_s, 50000);
  EXPECT_TRUE(c.host.valid());
}

TEST(HostCalibration, BadCountNamesFileLineAndField) {
  try {
    parse_calibration("{\"bench\":\"host\",\"cores\":1.5}\n", "cal.jsonl");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cal.jsonl:1: field 'cores'"), std::string::npos)
        << e.what();
  }
}

TEST(HostCalibration, MlpWorkloadCountsTheStepAsLoomRunsIt) {
  const Workload w = plan::read_workload(Config{});
  EXPECT_DOUBLE_EQ(w.params(), 1863690);
  // forward 2 x (784*1024 + 1024*1024 + 1024*10) per sample; the step skips fc1's d(input).
  EXPECT_DOUBLE_EQ(w.fwd_flops(), 3723264);
  EXPECT_DOUBLE_EQ(w.step_flops(), 3 * 3723264.0 - 2 * 784 * 1024);
  EXPECT_DOUBLE_EQ(w.elementwise_bytes, 50 * 2048 + 20 * 10);
  EXPECT_DOUBLE_EQ(mlp_elementwise_bytes({784, 1024, 10}, 0), 32 * 1024 + 200);
}

TEST(HostCalibration, CostModelOneWorkerByHand) {
  const Calibration c = parse_calibration(hand_lines(), "hand");
  const StepEstimate e = predict_case(plan::read_run_plan(Config{}), c, {1, "fp32", "thread"});
  const double gemm = 128 * 9564160.0 / 100e9;  // step FLOPs / GEMM rate
  const double ew = 128 * 102600.0 / 10e9;      // elementwise bytes / rate
  const double upd = 1863690 * 20.0 / 6e9;      // 5 passes of 4 bytes / a += b rate
  EXPECT_NEAR(e.fwd_s + e.bwd_s, gemm + ew, 1e-9);
  EXPECT_NEAR(e.update_s, upd, 1e-9);
  EXPECT_DOUBLE_EQ(e.comm_exposed_s, 0);
  EXPECT_DOUBLE_EQ(e.input_exposed_s, 0);  // one worker leaves a core idle for the loader
  EXPECT_NEAR(e.step_s, gemm + ew + upd, 1e-9);
  EXPECT_NEAR(e.step_s, 19.768e-3, 1e-6);
}

TEST(HostCalibration, CostModelTwoWorkersByHand) {
  const Calibration c = parse_calibration(hand_lines(), "hand");
  const StepEstimate e = predict_case(plan::read_run_plan(Config{}), c, {2, "fp32", "thread"});
  const double gemm = 128 * 9564160.0 / 90e9;
  const double ew = 128 * 102600.0 / (16e9 / 2);       // each worker gets half of 2 threads'
  const double upd = 1863690 * 20.0 / (10e9 / 2) / 2;  // sharded: half the parameters each
  // Buckets of 4 MiB in reverse layer order: out + fc2 fill one (4,194,304 B), the rest
  // (3,260,456 B) goes at the end of backward; each costs 2 alpha + S / B on two ranks.
  const double comm = 2 * 20e-6 + (4194304 + 3260456) / 4e9;
  const double input = 128 / 50000.0;         // each worker's loader: no idle core to hide it
  const double agree = 2 * 10e-6 + 32 / 4e9;  // the step's agreement: 32 bytes, 2 ranks
  EXPECT_NEAR(e.fwd_s + e.bwd_s, gemm + ew, 1e-9);
  EXPECT_NEAR(e.overhead_s, agree, 1e-12);
  EXPECT_NEAR(e.update_s, upd, 1e-9);
  EXPECT_NEAR(e.comm_s, comm, 1e-9);
  EXPECT_NEAR(e.comm_exposed_s, comm, 1e-9);  // both cores busy computing: nothing hides
  EXPECT_NEAR(e.input_exposed_s, input, 1e-9);
  EXPECT_NEAR(e.step_s, gemm + ew + upd + comm + input + agree, 1e-9);
}

TEST(HostCalibration, OneBitPaysCodecTimeAndSendsLess) {
  const Calibration c = parse_calibration(hand_lines(), "hand");
  const StepEstimate f = predict_case(plan::read_run_plan(Config{}), c, {2, "fp32", "thread"});
  const StepEstimate o = predict_case(plan::read_run_plan(Config{}), c, {2, "onebit", "thread"});
  // Stripe exchange on 2 ranks: encode 1.5 and decode 2 gradients' worth per rank.
  const double grad = 4 * 1863690.0;
  EXPECT_NEAR(o.codec_s, grad * (1.5 / 2e9 + 2 / 4e9), 1e-9);
  // About 1/28 of the bytes; what is left is mostly the per-message alpha of the two buckets.
  EXPECT_LT(o.comm_s, f.comm_s / 10);
  // 1 bit per element and two floats per column of loom's default width.
  const double bits = 1 + 64.0 / double(compress::kOnebitDefaultColumn);
  EXPECT_NEAR(o.comm_s, 2 * 20e-6 + 4 * 1863690.0 * bits / 32 / 4e9, 1e-6);
  // The codec turns the optimizer's sharding off: every rank updates everything.
  EXPECT_NEAR(o.update_s, 2 * f.update_s, 1e-9);
}

TEST(HostCalibration, BusyExchangeSlowsTheOverlappedComputeFromTheFirstBucketOn) {
  // The thread allreduce beside busy compute: alpha 500 us, 2 GB/s; it takes 30% of the
  // GEMM rate while it runs. As `loom bench calibrate` writes it (two sizes, one fit).
  std::string lines = hand_lines();
  for (size_t bytes : {size_t(64) << 10, size_t(4) << 20})
    lines +=
        busy_allreduce_line("thread", "native", 2, bytes, 1000 + bytes / 2e3, 0.3).dump() + "\n";
  const Calibration c = parse_calibration(lines, "hand");
  ASSERT_EQ(c.host.busy.count("thread"), 1u);
  EXPECT_NEAR(c.host.busy.at("thread").alpha_s, 500e-6, 1e-9);
  EXPECT_NEAR(c.host.busy.at("thread").bytes_per_s, 2e9, 1);
  EXPECT_DOUBLE_EQ(c.host.busy.at("thread").steal, 0.3);
  // Overlapped: the communication thread runs beside backward.
  Config overlap;
  overlap.set("sync.overlap", true);
  const StepEstimate q = predict_case(plan::read_run_plan(overlap),
                                      parse_calibration(hand_lines(), "q"), {2, "fp32", "thread"});
  const StepEstimate e = predict_case(plan::read_run_plan(overlap), c, {2, "fp32", "thread"});
  // The first bucket (out + fc2, 4 MiB) is ready when fc2's gradient is: 1 - fc1's share of
  // the FLOPs into backward. From then on the compute runs 30% slower.
  const double ready1 = q.bwd_s * (1 - 784.0 * 1024 / (784 * 1024 + 1024 * 1024 + 1024 * 10));
  EXPECT_NEAR(e.bwd_s - q.bwd_s, 0.3 * (q.bwd_s - ready1), 1e-9);
  EXPECT_NEAR(e.comm_s, q.comm_s, 1e-12);  // the link stays the quiet fit
  EXPECT_NEAR(e.step_s - q.step_s, 0.3 * (q.bwd_s - ready1), 1e-9);
  // Not overlapped (on these 2 cores, 2 workers' default): the exchange starts after
  // backward, so nothing runs beside the compute and nothing is stolen.
  Config serial;
  serial.set("sync.overlap", false);
  EXPECT_DOUBLE_EQ(predict_case(plan::read_run_plan(serial), c, {2, "fp32", "thread"}).bwd_s,
                   predict_case(plan::read_run_plan(serial), parse_calibration(hand_lines(), "q"),
                                {2, "fp32", "thread"})
                       .bwd_s);
  EXPECT_DOUBLE_EQ(predict_case(plan::read_run_plan(Config{}), c, {2, "fp32", "thread"}).bwd_s,
                   predict_case(plan::read_run_plan(serial), c, {2, "fp32", "thread"}).bwd_s);
  // One worker: nothing to exchange, nothing stolen.
  EXPECT_DOUBLE_EQ(predict_case(plan::read_run_plan(Config{}), c, {1, "fp32", "thread"}).step_s,
                   predict_case(plan::read_run_plan(Config{}), parse_calibration(hand_lines(), "q"),
                                {1, "fp32", "thread"})
                       .step_s);
}

TEST(HostCalibration, ShapedLinkCapsTheBandwidthAtTcpPayloadRate) {
  std::string lines = hand_lines();
  for (const nlohmann::json& j : {allreduce_line("mpi", "ring", 2, 1 << 20, 100 + 1048.576 / 2),
                                  allreduce_line("mpi", "ring", 2, 16 << 20, 100 + 16777.216 / 2)})
    lines += j.dump() + "\n";
  const Calibration c = parse_calibration(lines, "hand");
  experiments::ValidationCase k{2, "fp32", "mpi"};
  k.link_gbps = 1;
  const StepEstimate e = predict_case(plan::read_run_plan(Config{}), c, k);
  const double bw = 1e9 / 8 * 1448 / 1514;  // 119.5 MB/s of TCP payload
  EXPECT_NEAR(e.comm_s, 2 * 2 * 50e-6 + (4194304 + 3260456) / bw, 1e-9);
  EXPECT_EQ(k.label(), "2 workers fp32 mpi 1Gbit/s");
}

TEST(HostCalibration, TwoWorkersNeedTheTransportsLink) {
  std::string lines;
  for (const nlohmann::json& j :
       {host_line(2), gemm_line(1, 1, kMlp, 128, 100, "x"), membw_line("add", 1, 64 << 20, 6)})
    lines += j.dump() + "\n";
  const Calibration c = parse_calibration(lines, "cal.jsonl");
  EXPECT_NO_THROW(predict_case(plan::read_run_plan(Config{}), c, {1, "fp32", "thread"}));
  EXPECT_THROW(predict_case(plan::read_run_plan(Config{}), c, {2, "fp32", "mpi"}), InputError);
}

}  // namespace
}  // namespace loom::perf
