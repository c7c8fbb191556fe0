#include "loom/perf/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/perf/collective_model.h"

namespace loom::perf {
namespace {

// A two-layer workload whose numbers are easy to follow by hand.
Workload toy() {
  Workload w;
  w.name = "toy";
  w.layers = {{"a", 10e6, 1e9}, {"b", 15e6, 1e9}};  // 25M params = 100 MB, 2 GFLOP forward
  w.activation_bytes = 1e6;
  w.input_bytes = 1e3;
  return w;
}

Cluster cluster(int nodes, int k) {
  Cluster c;
  c.gpu.name = "g";
  c.gpu.fp32_tflops = 10;
  c.gpu.memory_gb = 16;
  c.gpu.mem_bw_gbs = 1000;
  c.gpu.host_link = "l";
  c.gpu.peer_link = "none";
  c.gpu.tdp_w = 100;
  c.gpu.price_usd = 1000;
  c.gpu.price_kind = "msrp";
  c.gpu.source = "test";
  c.topo = {nodes, k, {"in", "t", 10, 5, 1.0, "t"}, {"ex", "t", 1, 10, 1.0, "t"}};
  c.storage = {"disk", 1000, "t"};
  return c;
}

TrainSpec train(int64_t b) {
  TrainSpec t;
  t.batch = b;
  t.optimizer = "sgd";
  return t;
}

// The roofline at half of peak FLOP/s and 80% of memory bandwidth, no stragglers.
Derating quiet() {
  Derating d;
  d.compute = 0.5;
  d.memory = 0.8;
  d.jitter_cv = 0;
  return d;
}

TEST(CostModel, OneGpuComputeIsFlopsOverDeratedPeak) {
  CostModel m(toy(), cluster(1, 1), {}, train(32), quiet());
  StepEstimate e = m.estimate();
  double compute = 32 * 3 * 2e9 / (10e12 * 0.5);  // 38.4 ms
  EXPECT_NEAR(e.fwd_s + e.bwd_s, compute, 1e-12);
  EXPECT_NEAR(e.bwd_s, 2 * e.fwd_s, 1e-12);
  EXPECT_NEAR(e.update_s, 25e6 * 12 / (1000e9 * 0.8), 1e-12);
  EXPECT_EQ(e.comm_s, 0);
  EXPECT_DOUBLE_EQ(e.speedup, 1);
  EXPECT_EQ(e.limiter, "compute");
}

// Mixed precision's master weights: the 16-bit copy and the gradient's cast per micro-batch,
// the loss scale's pass once a step, on top of the optimizer's own bytes.
TEST(CostModel, MixedPrecisionUpdatesCastAndUnscaleTheMasterWeights) {
  TrainSpec t = train(32);
  t.precision = "fp16";
  const double P = 25e6, bw = 1000e9 * 0.8;
  EXPECT_NEAR(CostModel(toy(), cluster(1, 1), {}, t, quiet()).estimate().update_s,
              P * (12 + 12 + 8) / bw, 1e-12);
  t.accumulate = 4;
  EXPECT_NEAR(CostModel(toy(), cluster(1, 1), {}, t, quiet()).estimate().update_s,
              P * (12 + 4 * 12 + 8) / bw, 1e-12);
  // A published rate is a whole step, its casts included.
  Derating rate = quiet();
  rate.sample_s = 1e-3;
  rate.whole_step = true;
  EXPECT_EQ(CostModel(toy(), cluster(1, 1), {}, t, rate).estimate().update_s, 0);
}

// NCCL's base latency per collective (collective_model.h).
constexpr double kNcclLaunch = 8.4e-6;

TEST(CostModel, WithoutOverlapAllCommunicationIsExposed) {
  SyncSpec s;
  s.overlap = false;
  s.bucket_mb = 1000;  // one bucket: 100 MB
  CostModel m(toy(), cluster(1, 4), s, train(32), quiet());
  StepEstimate e = m.estimate();
  double comm = kNcclLaunch + 6 * 5e-6 + 1.5 * 100e6 / 10e9;
  EXPECT_NEAR(e.comm_s, comm, 1e-12);
  EXPECT_NEAR(e.comm_exposed_s, comm, 1e-12);
  // and the step's agreement: a ring of 32 bytes
  const double agree = kNcclLaunch + 6 * 5e-6 + 1.5 * 32 / 10e9;
  EXPECT_NEAR(e.overhead_s, agree, 1e-15);
  EXPECT_NEAR(e.step_s, e.fwd_s + e.bwd_s + comm + e.update_s + agree, 1e-12);
  EXPECT_NEAR(e.efficiency, (e.step_s - comm - agree) / e.step_s, 1e-9);
}

TEST(CostModel, OverlapHidesBucketsReadyEarly) {
  SyncSpec s;
  s.bucket_mb = 60;  // layer b (60 MB) is ready after half of backward, layer a at its end
  CostModel m(toy(), cluster(1, 4), s, train(32), quiet());
  StepEstimate e = m.estimate();
  double bwd = e.bwd_s;
  double cb = kNcclLaunch + 6 * 5e-6 + 1.5 * 60e6 / 10e9;
  double ca = kNcclLaunch + 6 * 5e-6 + 1.5 * 40e6 / 10e9;
  // b sent at bwd/2 (ends well before bwd); a at bwd: only a is exposed.
  ASSERT_LT(bwd / 2 + cb, bwd);
  EXPECT_NEAR(e.comm_exposed_s, ca, 1e-12);
}

TEST(CostModel, Fp16HalvesTheWireAndBmufDividesByTau) {
  SyncSpec s;
  s.overlap = false;
  s.bucket_mb = 1000;
  Derating d = quiet();
  double fp32 = CostModel(toy(), cluster(1, 4), s, train(32), d).estimate().comm_s;
  s.codec = "fp16";
  double fp16 = CostModel(toy(), cluster(1, 4), s, train(32), d).estimate().comm_s;
  EXPECT_NEAR(fp16 - kNcclLaunch - 6 * 5e-6, (fp32 - kNcclLaunch - 6 * 5e-6) / 2, 1e-12);
  s.codec = "fp32";
  s.bmuf = true;
  s.tau = 8;
  EXPECT_NEAR(CostModel(toy(), cluster(1, 4), s, train(32), d).estimate().comm_s, fp32 / 8, 1e-12);
}

TEST(CostModel, TwoLevelCodecsEncodeOnlyAcrossNodes) {
  // 2 nodes x 4 GPUs, one 100 MB bucket: loom's two-level codec exchange is what the collective
  // model gives for it (fp32 inside nodes); casting before the collective (the published
  // systems' way) shrinks the stages inside nodes too, so it is faster by the saved intra bytes.
  SyncSpec s;
  s.overlap = false;
  s.bucket_mb = 1000;
  s.algorithm = "two-level";
  s.codec = "fp16";
  const Cluster c = cluster(2, 4);
  const double loom = CostModel(toy(), c, s, train(32), quiet()).estimate().comm_s;
  EXPECT_NEAR(loom, two_level_codec_seconds(c.topo, 100e6, codec_model("fp16")), 1e-12);
  s.codec_inside_nodes = true;
  const double cast = CostModel(toy(), c, s, train(32), quiet()).estimate().comm_s;
  EXPECT_NEAR(cast, allreduce_seconds(Algorithm::kTwoLevel, c.topo, 50e6), 1e-12);
  EXPECT_NEAR(loom - cast, 0.5 * 2 * 0.75 * 100e6 / 10e9, 1e-9);  // half the intra bytes
  // 1-bit keeps a residual for its node-shard only: 1/4 of the parameters' fp32 per GPU.
  s.codec_inside_nodes = false;
  s.codec = "onebit";
  const MemoryBreakdown two = CostModel(toy(), c, s, train(32), quiet()).estimate().memory;
  s.algorithm = "ring";
  const MemoryBreakdown ring = CostModel(toy(), c, s, train(32), quiet()).estimate().memory;
  EXPECT_NEAR(ring.codec - two.codec, 100e6 * 3 / 4, 1);
}

// A codec's warm-up: its share of the run's steps are fp32 allreduces with full updates, so the
// run's mean step is the mix of the two steps in those proportions.
TEST(CostModel, CodecWarmupMixesFp32StepsIntoTheRun) {
  SyncSpec s;
  s.overlap = false;
  s.bucket_mb = 1000;
  s.codec = "onebit";
  Derating d;
  d.compute = 0.5;
  d.memory = 0.8;
  const StepEstimate codec = CostModel(toy(), cluster(1, 4), s, train(32), d).estimate();
  SyncSpec warm = s;
  warm.codec = "fp32";
  const StepEstimate fp32 = CostModel(toy(), cluster(1, 4), warm, train(32), d).estimate();
  ASSERT_GT(fp32.step_s, codec.step_s);
  s.codec_warmup_share = 0.25;
  const StepEstimate mixed = CostModel(toy(), cluster(1, 4), s, train(32), d).estimate();
  EXPECT_NEAR(mixed.step_s, 0.75 * codec.step_s + 0.25 * fp32.step_s, 1e-12);
  EXPECT_NEAR(mixed.comm_s, 0.75 * codec.comm_s + 0.25 * fp32.comm_s, 1e-12);
  EXPECT_NEAR(mixed.samples_per_s, 4 * 32 / mixed.step_s, 1e-9);
  EXPECT_LT(mixed.speedup, codec.speedup);
  // fp32 has nothing to warm up; a share of 1 or more would never start the codec.
  warm.codec_warmup_share = 0.25;
  EXPECT_DOUBLE_EQ(CostModel(toy(), cluster(1, 4), warm, train(32), d).estimate().step_s,
                   fp32.step_s);
  s.codec_warmup_share = 1.0;
  EXPECT_THROW(CostModel(toy(), cluster(1, 4), s, train(32), d), InputError);
  s.codec_warmup_share = -0.1;
  EXPECT_THROW(CostModel(toy(), cluster(1, 4), s, train(32), d), InputError);
}

TEST(CostModel, MemoryFitCountsWeightsGradsStateActivations) {
  TrainSpec t = train(1000);
  t.optimizer = "adam";
  CostModel m(toy(), cluster(1, 1), {}, t);
  StepEstimate e = m.estimate();
  EXPECT_DOUBLE_EQ(e.memory.weights + e.memory.grads + e.memory.optimizer, 16 * 25e6);
  EXPECT_DOUBLE_EQ(e.memory.activations, 1000 * 1e6);
  EXPECT_TRUE(e.fits);  // 0.4 + 1 + 0.5 GB < 16 GB
  t.batch = 20000;      // 20 GB of activations
  StepEstimate big = CostModel(toy(), cluster(1, 1), {}, t).estimate();
  EXPECT_FALSE(big.fits);
  EXPECT_EQ(big.limiter, "memory");
}

TEST(CostModel, SlowStorageWithoutPrefetchAddsItsTime) {
  Cluster c = cluster(1, 1);
  c.storage.read_mbs = 0.1;  // 100 KB/s: 32 samples of 1 KB take 0.32 s
  TrainSpec t = train(32);
  t.prefetch = false;
  StepEstimate e = CostModel(toy(), c, {}, t).estimate();
  EXPECT_NEAR(e.input_exposed_s, 0.32, 1e-12);
  EXPECT_EQ(e.limiter, "input");
  t.prefetch = true;
  StepEstimate p = CostModel(toy(), c, {}, t).estimate();
  EXPECT_NEAR(p.input_exposed_s, 0.32 - (p.fwd_s + p.bwd_s + p.update_s), 1e-12);
}

TEST(CostModel, APublishedRateIsAWholeStep) {
  Derating d = quiet();
  d.sample_s = 1e-3;  // 1000 samples/s, update included
  d.whole_step = true;
  StepEstimate e = CostModel(toy(), cluster(1, 1), {}, train(32), d).estimate();
  EXPECT_NEAR(e.fwd_s + e.bwd_s, 0.032, 1e-12);
  EXPECT_EQ(e.update_s, 0);
}

TEST(CostModel, StragglersGrowWithTheNumberOfWorkers) {
  Derating d = quiet();
  d.jitter_cv = 0.02;
  SyncSpec s;
  s.step_overhead_s = 1e-3;
  s.step_agreement_bytes = 0;
  const StepEstimate one = CostModel(toy(), cluster(1, 1), s, train(32), d).estimate();
  const StepEstimate four = CostModel(toy(), cluster(1, 4), s, train(32), d).estimate();
  const StepEstimate many = CostModel(toy(), cluster(64, 4), s, train(32), d).estimate();
  EXPECT_EQ(one.straggler_s, 0);
  EXPECT_EQ(one.overhead_s, 0);
  EXPECT_NEAR(four.straggler_s, 0.02 * expected_max_normal(4) * (four.fwd_s + four.bwd_s), 1e-12);
  EXPECT_EQ(four.overhead_s, 1e-3);
  EXPECT_GT(many.straggler_s, 2 * four.straggler_s);
}

TEST(CostModel, LoomsStepEndsWithASmallAllreduceInTheRunsAlgorithm) {
  // The step guard's 32 bytes over all ranks: latency, in the configured algorithm (a
  // parameter server's world runs it by halving-doubling).
  const Cluster c = cluster(4, 2);
  for (const char* algo : {"ring", "hd", "two-level", "ps"}) {
    SyncSpec s;
    s.algorithm = algo;
    const StepEstimate e = CostModel(toy(), c, s, train(32), quiet()).estimate();
    const Algorithm a =
        std::string(algo) == "ps" ? Algorithm::kHalvingDoubling : algorithm_from_name(algo);
    EXPECT_DOUBLE_EQ(e.overhead_s, allreduce_seconds(a, c.topo, kLoomStepAgreementBytes)) << algo;
    EXPECT_GT(e.overhead_s, 0) << algo;
    s.step_agreement_bytes = 0;  // a system without it
    EXPECT_EQ(CostModel(toy(), c, s, train(32), quiet()).estimate().overhead_s, 0) << algo;
  }
  // One worker agrees with nobody.
  EXPECT_EQ(CostModel(toy(), cluster(1, 1), {}, train(32), quiet()).estimate().overhead_s, 0);
}

TEST(CostModel, ExpectedMaximumOfNormals) {
  EXPECT_EQ(expected_max_normal(1), 0);
  EXPECT_NEAR(expected_max_normal(2), 1 / std::sqrt(M_PI), 1e-4);  // 0.5642
  EXPECT_NEAR(expected_max_normal(10), 1.5388, 1e-3);
  EXPECT_NEAR(expected_max_normal(1000), 3.2414, 2e-3);
}

TEST(CostModel, BadSpecsAreErrors) {
  EXPECT_THROW(CostModel(toy(), cluster(1, 1), {}, train(0)), InputError);
  SyncSpec s;
  s.codec = "fp8";
  EXPECT_THROW(CostModel(toy(), cluster(1, 1), s, train(1)), InputError);
}

TEST(CostModel, AccumulationExchangesOncePerStepOfSeveralMicroBatches) {
  Derating d = quiet();
  d.sample_s = 1e-3;
  TrainSpec one = train(32), four = train(32);
  four.accumulate = 4;
  const StepEstimate a = CostModel(toy(), cluster(1, 4), {}, one, d).estimate();
  const StepEstimate b = CostModel(toy(), cluster(1, 4), {}, four, d).estimate();
  EXPECT_NEAR(b.fwd_s + b.bwd_s, 4 * (a.fwd_s + a.bwd_s), 1e-12);
  EXPECT_NEAR(b.comm_s, a.comm_s, 1e-12);  // the same gradient, sent once
  EXPECT_GT(b.samples_per_s, a.samples_per_s * (1 - 1e-9));
  EXPECT_NEAR(b.samples_per_s, 4 * 32 * 4 / b.step_s, 1e-6);
  four.accumulate = 0;
  EXPECT_THROW(CostModel(toy(), cluster(1, 4), {}, four, d), InputError);
}

}  // namespace
}  // namespace loom::perf
