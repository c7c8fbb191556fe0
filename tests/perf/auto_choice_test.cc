#include "loom/perf/auto_choice.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

using ::testing::HasSubstr;

// The default job's MLP (784-1024-1024-10): layers in forward order, parameters and FLOPs.
Workload mlp() {
  Workload w;
  w.name = "mlp";
  const double widths[] = {784, 1024, 1024, 10};
  for (int l = 0; l < 3; ++l) {
    LayerCost c;
    c.name = fmt::format("fc{}", l + 1);
    c.params = widths[l] * widths[l + 1] + widths[l + 1];
    c.fwd_flops = 2 * widths[l] * widths[l + 1];
    w.layers.push_back(c);
  }
  return w;
}

// Recorded on the 2-core Zen 4 box (docs/perf.md, docs/compress.md): 2 workers' step compute
// 13.5 ms, `loom bench codec` encode / decode GB/s (topk and powersgd were not measured).
AutoMeasurements zen4(double link_bytes_per_s, double alpha_s) {
  AutoMeasurements m;
  m.compute_s = 13.5e-3;
  m.link.bytes_per_s = link_bytes_per_s;
  m.link.alpha_s = alpha_s;
  m.codec_gbs = {{"fp16", {13.3, 23.5}},
                 {"bf16", {17.6, 24.7}},
                 {"int8", {10.5, 26.6}},
                 {"onebit", {18.2, 38.2}}};
  m.source = "recorded";
  return m;
}
// 1 Gbit/s through tbf: TCP payload at 1448 of 1514 bytes.
const double kOneGbit = 1e9 / 8 * 1448.0 / 1514.0;

AutoRequest request() {
  AutoRequest r;
  r.workload = mlp();
  r.network = {"mlp", "sgd_momentum", 2, AccuracyMetric::kPoints};
  r.ranks = 2;
  r.batch = 128;
  r.overlap = false;  // 2 workers on 2 cores
  r.total_steps = 1000;
  r.codecs = {"fp32", "fp16", "bf16", "int8", "onebit", "topk", "powersgd"};
  r.syncs = {"allreduce", "bmuf"};
  r.bucket_kib = {1024, 4096, 16384};
  return r;
}

const AutoCandidate* find(const AutoDecision& d, const std::string& codec,
                          const std::string& sync) {
  for (const auto& k : d.candidates)
    if (k.codec == codec && k.sync == sync) return &k;
  return nullptr;
}

TEST(AutoChoice, SlowLinkChoosesOneBitAtLeastThreeTimesFp32) {
  const AutoDecision d = decide_auto(request(), zen4(kOneGbit, 100e-6), builtin_accuracy_table());
  EXPECT_EQ(d.chosen.codec, "onebit") << d.reason;
  EXPECT_GE(d.chosen.estimate.samples_per_s, 3 * d.fp32_samples_per_s) << d.reason;
  // The fp32 baseline: 2 x 128 samples over the compute plus a ring of 7.45 MB on 120 MB/s.
  const double fp32_step = 13.5e-3 + 7.45e6 / kOneGbit;
  EXPECT_NEAR(d.fp32_samples_per_s, 256 / fp32_step, 0.1 * 256 / fp32_step);
  ASSERT_TRUE(d.runner_up.has_value());
  EXPECT_FALSE(d.runner_up->codec == d.chosen.codec && d.runner_up->sync == d.chosen.sync);
  EXPECT_LE(d.runner_up->estimate.samples_per_s, d.chosen.estimate.samples_per_s);
  ASSERT_TRUE(d.chosen.measured.has_value());
  EXPECT_THAT(d.chosen.measured->source, HasSubstr("bench/"));
  EXPECT_THAT(d.reason, HasSubstr("x fp32"));
  // Block momentum's chunks are not priced: its one candidate keeps the default 4 MiB.
  for (const auto& k : d.candidates) {
    if (k.sync == "bmuf") {
      EXPECT_EQ(k.bucket_kib, 4096) << k.label();
    }
  }
  // Codecs whose speed was not measured are never chosen, and say why.
  const AutoCandidate* topk = find(d, "topk", "allreduce");
  ASSERT_NE(topk, nullptr);
  EXPECT_THAT(topk->excluded, HasSubstr("not measured"));
}

TEST(AutoChoice, FastLoopbackChoosesPlainFp32) {
  // The thread transport: 20 GB/s, 10 us; fp32's 7.45 MB cost 0.4 ms, less than any codec's
  // encode and decode passes on this CPU.
  const AutoDecision d = decide_auto(request(), zen4(20e9, 10e-6), builtin_accuracy_table());
  EXPECT_EQ(d.chosen.codec, "fp32") << d.reason;
  EXPECT_EQ(d.chosen.sync, "allreduce") << d.reason;
  EXPECT_TRUE(d.chosen.lossless());
  // Block momentum skips 7/8 of the exchange, but that gain is inside the model's error.
  const AutoCandidate* bmuf = find(d, "fp32", "bmuf");
  ASSERT_NE(bmuf, nullptr);
  EXPECT_LT(bmuf->estimate.samples_per_s, 1.05 * d.chosen.estimate.samples_per_s);
  const AutoCandidate* onebit = find(d, "onebit", "allreduce");
  ASSERT_NE(onebit, nullptr);
  EXPECT_LT(onebit->estimate.samples_per_s, d.chosen.estimate.samples_per_s);
}

TEST(AutoChoice, LossyForbiddenOnASlowLinkKeepsFp32AndSaysTheLinkDominates) {
  AutoRequest r = request();
  r.lossy = LossyPolicy::kNever;
  const AutoDecision d = decide_auto(r, zen4(kOneGbit, 100e-6), builtin_accuracy_table());
  EXPECT_TRUE(d.chosen.lossless()) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("The link will dominate"));
  EXPECT_THAT(d.reason, HasSubstr("auto.lossy = false"));
  for (const auto& k : d.candidates) {
    if (!k.lossless() && k.codec != "topk" && k.codec != "powersgd") {
      EXPECT_THAT(k.excluded, HasSubstr("forbidden")) << k.label();
    }
  }
  // It still picks the best buckets among the lossless options.
  for (const auto& k : d.candidates) {
    if (k.lossless()) {
      EXPECT_LE(k.estimate.samples_per_s, d.chosen.estimate.samples_per_s);
    }
  }
}

TEST(AutoChoice, UnknownNetworkStaysLosslessUnlessTheUserOptsIn) {
  AutoRequest r = request();
  r.network.family = "";  // the user's own graph: no row, and no fidelity measured
  const AutoDecision d = decide_auto(r, zen4(kOneGbit, 100e-6), builtin_accuracy_table());
  EXPECT_TRUE(d.chosen.lossless()) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("no evidence of their accuracy cost"));
  EXPECT_THAT(d.reason, HasSubstr("auto.lossy = true"));
  r.lossy = LossyPolicy::kAlways;
  const AutoDecision opted = decide_auto(r, zen4(kOneGbit, 100e-6), builtin_accuracy_table());
  EXPECT_EQ(opted.chosen.codec, "onebit") << opted.reason;
  EXPECT_FALSE(opted.chosen.measured.has_value());
  EXPECT_THAT(opted.reason, HasSubstr("unknown"));
}

// A row matches only on everything that determines a delta: the same MLP trained with Adam, or
// on 4 workers, has none, whatever its size.
TEST(AutoChoice, ARowMatchesFamilyOptimizerAndWorkersNeverTheSize) {
  const AccuracyTable t = builtin_accuracy_table();
  NetworkKey k{"mlp", "sgd_momentum", 2, AccuracyMetric::kPoints};
  EXPECT_NE(t.find(k, "onebit", "allreduce", 0), nullptr);
  k.optimizer = "adam";
  EXPECT_EQ(t.find(k, "onebit", "allreduce", 0), nullptr);
  k = {"mlp", "sgd_momentum", 4, AccuracyMetric::kPoints};
  EXPECT_EQ(t.find(k, "onebit", "allreduce", 0), nullptr);
  k = {"cnn", "sgd_momentum", 2, AccuracyMetric::kPoints};
  EXPECT_EQ(t.find(k, "onebit", "allreduce", 0), nullptr);
  k = {"", "sgd_momentum", 2, AccuracyMetric::kPoints};
  EXPECT_EQ(t.find(k, "onebit", "allreduce", 0), nullptr);
}

// Before the fidelity is measured, a network without a row waits for it; the reason says so.
TEST(AutoChoice, AtTheStartANetworkWithoutARowWaitsForItsFidelity) {
  AutoRequest r = request();
  r.network = {"", "adamw", 2, AccuracyMetric::kBits};
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  m.fidelity_pending = "measured on the gradients of the run's first 30 steps";
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  EXPECT_TRUE(d.chosen.lossless()) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("wait for their fidelity"));
  const AutoCandidate* onebit = find(d, "onebit", "allreduce");
  ASSERT_NE(onebit, nullptr);
  EXPECT_THAT(onebit->excluded, HasSubstr("first 30 steps"));
  const AutoCandidate* block = find(d, "fp32", "bmuf");
  ASSERT_NE(block, nullptr);
  EXPECT_THAT(block->excluded, HasSubstr("block momentum"));
}

CodecFidelity fidelity(const std::string& codec, double drift, double cosine, double growth = 1.0) {
  CodecFidelity f;
  f.codec = codec;
  f.steps = 30;
  f.drift = drift;
  f.update_cosine = cosine;
  f.residual = 1;
  f.residual_growth = growth;
  return f;
}

// The measured fidelity decides where no row does: a 1-bit codec whose updates stay as close
// to the exact ones as the calibration's lossless-looking cases (drift up to 0.004) is chosen
// on a slow link, one that drifts as far as the cases that cost accuracy is not, and the next
// best with a small drift is.
TEST(AutoChoice, WithoutARowTheMeasuredFidelityDecides) {
  const AccuracyTable table = builtin_accuracy_table();
  AutoRequest r = request();
  r.network = {"", "sgd_momentum", 2, AccuracyMetric::kPoints};
  r.syncs = {"allreduce"};
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  m.fidelity = {fidelity("fp16", 1e-5, 1.0), fidelity("bf16", 1e-4, 1.0),
                fidelity("int8", 1e-3, 1.0), fidelity("onebit", 0.003, 0.999)};
  const AutoDecision d = decide_auto(r, m, table);
  EXPECT_EQ(d.chosen.codec, "onebit") << d.reason;
  ASSERT_TRUE(d.chosen.verdict.has_value());
  EXPECT_EQ(d.chosen.verdict->risk, FidelityRisk::kWithin);
  EXPECT_THAT(d.reason, HasSubstr("fidelity on this run's gradients is within the budget"));
  EXPECT_THAT(describe_decision(d, m), HasSubstr("fidelity within"));
  const nlohmann::json j = decision_json(d, m);
  EXPECT_EQ(j["chosen"]["fidelity_verdict"]["risk"], "within");
  EXPECT_GT(j["candidates"].size(), 3u);

  m.fidelity.back() = fidelity("onebit", 0.6, 0.8);
  const AutoDecision far = decide_auto(r, m, table);
  const AutoCandidate* onebit = find(far, "onebit", "allreduce");
  ASSERT_NE(onebit, nullptr);
  EXPECT_THAT(onebit->excluded, HasSubstr("over the budget"));
  EXPECT_NE(far.chosen.codec, "onebit");
  EXPECT_FALSE(far.chosen.lossless()) << far.reason;  // int8 or a 16-bit codec: within

  m.fidelity.back() = fidelity("onebit", 0.05, 0.95);  // between the calibration's cases
  const AutoDecision between = decide_auto(r, m, table);
  EXPECT_THAT(find(between, "onebit", "allreduce")->excluded, HasSubstr("between"));
  r.lossy = LossyPolicy::kAlways;  // the user accepts an unknown cost, not a known excess
  EXPECT_EQ(decide_auto(r, m, table).chosen.codec, "onebit");
  m.fidelity.back() = fidelity("onebit", 0.6, 0.8);
  EXPECT_NE(decide_auto(r, m, table).chosen.codec, "onebit");
}

// A matching row decides over the fidelity, except when the run's residual keeps growing.
TEST(AutoChoice, ARowDecidesUnlessTheResidualGrows) {
  AutoRequest r = request();
  r.syncs = {"allreduce"};
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  m.fidelity = {fidelity("onebit", 0.6, 0.8)};  // far, but the MLP's row speaks for it
  EXPECT_EQ(decide_auto(r, m, builtin_accuracy_table()).chosen.codec, "onebit");
  m.fidelity = {fidelity("onebit", 0.1, 0.9, 3.0)};
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  EXPECT_NE(d.chosen.codec, "onebit");
  EXPECT_THAT(find(d, "onebit", "allreduce")->excluded, HasSubstr("residual grows"));
}

TEST(AutoChoice, AccuracyCapExcludesWhatCostsMore) {
  const AccuracyTable table = builtin_accuracy_table();
  const NetworkKey mlp_key = request().network;
  const AccuracyDelta* onebit = table.find(mlp_key, "onebit", "allreduce", 0);
  const AccuracyDelta* bmuf_onebit = table.find(mlp_key, "onebit", "bmuf", 8);
  ASSERT_NE(onebit, nullptr);
  ASSERT_NE(bmuf_onebit, nullptr);
  // A cap between the two losses: 1-bit through the allreduce is out, with block momentum in.
  const double lo = bmuf_onebit->loss(), hi = onebit->loss();
  ASSERT_LT(lo, hi);
  AutoRequest r = request();
  r.max_accuracy_delta = (lo + hi) / 2;
  const AutoDecision d = decide_auto(r, zen4(kOneGbit, 100e-6), table);
  const AutoCandidate* out = find(d, "onebit", "allreduce");
  ASSERT_NE(out, nullptr);
  EXPECT_THAT(out->excluded, HasSubstr("over the budget"));
  ASSERT_TRUE(d.chosen.measured.has_value() || d.chosen.lossless());
  if (d.chosen.measured) {
    EXPECT_LE(d.chosen.measured->loss(), r.max_accuracy_delta);
  }
  EXPECT_NE(d.chosen.codec + d.chosen.sync, "onebitallreduce");
  // A cap below every measured loss leaves only the gains and the exact options.
  r.max_accuracy_delta = 0;
  const AutoDecision strict = decide_auto(r, zen4(kOneGbit, 100e-6), table);
  EXPECT_TRUE(!strict.chosen.measured || strict.chosen.measured->delta >= 0) << strict.reason;
}

TEST(AutoChoice, FixedKeysLimitTheCandidates) {
  AutoRequest r = request();
  r.codecs = {"fp32"};  // codec fixed, sync auto
  const AutoDecision d = decide_auto(r, zen4(kOneGbit, 100e-6), builtin_accuracy_table());
  EXPECT_EQ(d.chosen.codec, "fp32");
  EXPECT_EQ(d.chosen.sync, "bmuf") << d.reason;  // block momentum is the only lever left
  for (const auto& k : d.candidates) EXPECT_EQ(k.codec, "fp32");
  r = request();
  r.bucket_kib = {4096};
  for (const auto& k : decide_auto(r, zen4(20e9, 10e-6), builtin_accuracy_table()).candidates)
    EXPECT_EQ(k.bucket_kib, 4096);
}

// Top-k is weighed where the model predicts it and an accuracy delta is recorded: through the
// allreduce (the reference job's row), not with block momentum (no row), which stays out and
// says why. Its speed: `loom bench codec --codec topk` on Zen 5 (loaded), 0.24 GB/s encode
// (the selection), 22.8 GB/s decode.
TEST(AutoChoice, TopkIsACandidateOnlyWhereItsAccuracyWasMeasured) {
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  m.codec_gbs["topk"] = {0.24, 22.8};
  const AutoDecision d = decide_auto(request(), m, builtin_accuracy_table());
  const AutoCandidate* through = find(d, "topk", "allreduce");
  ASSERT_NE(through, nullptr);
  EXPECT_EQ(through->excluded, "") << through->label();
  ASSERT_TRUE(through->measured.has_value());
  EXPECT_GT(through->estimate.samples_per_s, d.fp32_samples_per_s);  // 2% of fp32's bytes
  const AutoCandidate* block = find(d, "topk", "bmuf");
  ASSERT_NE(block, nullptr);
  EXPECT_THAT(block->excluded, HasSubstr("no evidence of its accuracy cost"));
  // Its selection costs more than the 1-bit codec's passes: 1-bit stays ahead on this link.
  EXPECT_EQ(d.chosen.codec, "onebit") << d.reason;
}

TEST(AutoChoice, BadRequestsAreInputErrors) {
  AutoRequest r = request();
  r.codecs = {"zip"};
  EXPECT_THROW(decide_auto(r, zen4(kOneGbit, 1e-4), builtin_accuracy_table()), InputError);
  r = request();
  r.syncs = {"ps"};
  EXPECT_THROW(decide_auto(r, zen4(kOneGbit, 1e-4), builtin_accuracy_table()), InputError);
  AutoMeasurements none = zen4(kOneGbit, 1e-4);
  none.compute_s = 0;
  EXPECT_THROW(decide_auto(request(), none, builtin_accuracy_table()), InputError);
  // Only lossy options allowed by the config, all over the budget: nothing to choose.
  r = request();
  r.codecs = {"onebit"};
  r.syncs = {"allreduce"};
  r.max_accuracy_delta = 0.01;
  try {
    decide_auto(r, zen4(kOneGbit, 1e-4), builtin_accuracy_table());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("over the budget"));
  }
}

// The check after the warm-up window, on recorded figures. The start-up measured the thread
// transport (20 GB/s, 10 us), so auto runs fp32 through the allreduce.
AutoRevision revise_fast_start(const AutoObservation& o, AutoRequest r = request()) {
  const AutoMeasurements m = zen4(20e9, 10e-6);
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  EXPECT_EQ(d.chosen.codec, "fp32") << d.reason;
  EXPECT_EQ(d.chosen.sync, "allreduce") << d.reason;
  return revise_auto(r, m, builtin_accuracy_table(), d.chosen, o);
}

TEST(AutoRevision, AMeasuredStepWithinTheValidatedErrorChangesNothing) {
  // 13.5 ms of compute and 7.45 MB through 20 GB/s (0.37 ms): a 14.6 ms step measured is
  // within 15% of that.
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.step_s = 14.6e-3;
  o.exposed_comm_s = 0.5e-3;
  const AutoRevision v = revise_fast_start(o);
  EXPECT_EQ(v.outcome, RevisionOutcome::kAgrees) << v.reason;
  EXPECT_LE(std::abs(v.error), kModelValidatedError);
  EXPECT_FALSE(v.revised.has_value());
  EXPECT_TRUE(same_configuration(v.after, v.before));
  EXPECT_EQ(v.compute_factor, 1);
  EXPECT_EQ(v.link_factor, 1);
  EXPECT_THAT(v.reason, HasSubstr("within the model's validated error of 15%"));
  const nlohmann::json j = revision_json(v);
  EXPECT_EQ(j["outcome"], "agrees");
  EXPECT_FALSE(j.contains("corrected"));
}

TEST(AutoRevision, ALinkSlowerThanMeasuredAtStartFlipsTheRanking) {
  // The run's link turned out to be 1 Gbit/s (docs/perf.md's shaped fp32 runs: the exchange
  // of 7.45 MB takes ~62 ms): the step is 5x the prediction, nearly all of it communication.
  AutoObservation o;
  o.first_step = 16;
  o.steps = 24;
  o.exposed_comm_s = 7.45e6 / kOneGbit;
  o.step_s = 13.5e-3 + o.exposed_comm_s;
  const AutoRevision v = revise_fast_start(o);
  ASSERT_EQ(v.outcome, RevisionOutcome::kSwitched) << v.reason;
  EXPECT_GT(-v.error, kModelValidatedError);
  // The link is what the window contradicts: its time grows by about 20 GB/s over 120 MB/s,
  // the compute stays about where it was measured.
  EXPECT_GT(v.link_factor, 0.5 * 20e9 / kOneGbit);
  EXPECT_LT(v.link_factor, 2 * 20e9 / kOneGbit);
  EXPECT_EQ(v.compute_factor, 1);  // the rest of the step was as predicted: left alone
  // The corrected figures reproduce the window for the running choice.
  const StepEstimate again = predict_candidate(request(), v.corrected, v.before);
  EXPECT_NEAR(again.step_s, o.step_s, 0.02 * o.step_s);
  EXPECT_NEAR(again.comm_exposed_s, o.exposed_comm_s, 0.02 * o.exposed_comm_s);
  // On a 1 Gbit/s link the start-up would have chosen 1-bit (SlowLinkChooses...): so does the
  // revision, and it is allowed by the accuracy budget.
  EXPECT_NE(v.after.codec, "fp32") << v.reason;
  ASSERT_TRUE(v.after.measured.has_value());
  EXPECT_LE(v.after.measured->loss(), request().max_accuracy_delta);
  ASSERT_TRUE(v.revised.has_value());
  EXPECT_GE(v.after.estimate.samples_per_s, 2 * v.revised->fp32_samples_per_s);
  EXPECT_THAT(v.reason, HasSubstr("switching"));
  const nlohmann::json j = revision_json(v);
  EXPECT_EQ(j["outcome"], "switched");
  EXPECT_EQ(j["before"]["codec"], "fp32");
  EXPECT_EQ(j["after"]["codec"], v.after.codec);
  EXPECT_DOUBLE_EQ(j["measured"]["step_s"].get<double>(), o.step_s);
  EXPECT_THAT(describe_revision(v), HasSubstr("re-decided, switched"));
}

TEST(AutoRevision, ASlowerComputeIsOffButKeepsTheChoice) {
  // The step's compute is twice what the start-up measured (another job took a core), the
  // exchange as predicted: off by ~50%, but with the compute corrected fp32 is still first.
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.exposed_comm_s = 0.4e-3;
  o.step_s = 27e-3 + o.exposed_comm_s;
  const AutoRevision v = revise_fast_start(o);
  EXPECT_EQ(v.outcome, RevisionOutcome::kKept) << v.reason;
  EXPECT_GT(-v.error, kModelValidatedError);
  EXPECT_GT(v.compute_factor, 1.7);
  EXPECT_LT(v.compute_factor, 2.3);
  EXPECT_EQ(v.link_factor, 1);  // the exchange was as predicted: left alone
  ASSERT_TRUE(v.revised.has_value());
  EXPECT_TRUE(same_configuration(v.after, v.before));
  EXPECT_EQ(v.revised->chosen.codec, "fp32");
  EXPECT_EQ(revision_json(v)["outcome"], "kept");
  EXPECT_THAT(describe_revision(v), HasSubstr("re-decided, kept"));
}

// An overlapped exchange on a machine whose cores the compute fills: the window's forward ran
// as the start-up measured it, its backward slower. The communication thread took that share
// beside backward; block momentum, which exchanges after a block and not beside backward,
// does not pay it.
AutoRevision revise_overlapped(double forward_factor, double backward_extra_s) {
  AutoRequest r = request();
  r.overlap = true;
  AutoMeasurements m = zen4(20e9, 10e-6);
  m.forward_s = m.compute_s / 3;
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  EXPECT_EQ(d.chosen.codec, "fp32") << d.reason;
  EXPECT_EQ(d.chosen.sync, "allreduce") << d.reason;
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.forward_s = m.forward_s * forward_factor;
  o.exposed_comm_s = 0.4e-3;
  o.step_s = m.compute_s * forward_factor + backward_extra_s + o.exposed_comm_s;
  return revise_auto(r, m, builtin_accuracy_table(), d.chosen, o);
}

TEST(AutoRevision, ABackwardSlowerThanItsForwardIsTheCommunicationThreads) {
  const AutoRevision v = revise_overlapped(1.0, 3e-3);
  ASSERT_TRUE(v.revised.has_value()) << v.reason;
  EXPECT_DOUBLE_EQ(v.compute_factor, 1.0);  // the forward says the compute ran as measured
  EXPECT_GT(v.link_steal, 0.2);
  EXPECT_LT(v.link_steal, 1.0);
  // The corrected figures reproduce the window for the running choice.
  AutoRequest r = request();
  r.overlap = true;
  const StepEstimate again = predict_candidate(r, v.corrected, v.before);
  EXPECT_NEAR(again.step_s, v.observed.step_s, 0.02 * v.observed.step_s);
  // What exchanges less beside backward (one bucket after it, or block momentum) is now ahead
  // by more than the margin: the run switches, and the new choice is predicted faster on the
  // corrected figures by at least that margin.
  ASSERT_EQ(v.outcome, RevisionOutcome::kSwitched) << v.reason;
  EXPECT_FALSE(same_configuration(v.after, v.before));
  EXPECT_LE(v.after.estimate.step_s * (1 + r.min_gain), again.step_s) << v.reason;
  EXPECT_THAT(v.reason, HasSubstr("the communication thread taking"));
  EXPECT_GT(revision_json(v)["corrected"]["link_steal"].get<double>(), 0.2);
}

TEST(AutoRevision, TheCommunicationThreadTakesAtMostAllOfBackwardBesideIt) {
  // More excess than the whole overlapped span of backward: the share stops at all of it and
  // the compute takes the remainder.
  const AutoRevision v = revise_overlapped(1.0, 20e-3);
  ASSERT_TRUE(v.revised.has_value()) << v.reason;
  EXPECT_EQ(v.link_steal, 1.0);
  EXPECT_GT(v.compute_factor, 1.0);
}

TEST(AutoRevision, AComputeSlowInItsForwardTooIsTheComputes) {
  // The whole step twice as slow, the forward too (another job took a core): the compute's
  // own factor, nothing for the communication thread, and fp32 stays first.
  const AutoRevision v = revise_overlapped(2.0, 0);
  ASSERT_TRUE(v.revised.has_value()) << v.reason;
  EXPECT_GT(v.compute_factor, 1.7);
  EXPECT_LT(v.compute_factor, 2.3);
  EXPECT_EQ(v.link_steal, 0);
  EXPECT_EQ(v.outcome, RevisionOutcome::kKept) << v.reason;
}

TEST(AutoRevision, WithoutATimedForwardTheExcessIsTheComputes) {
  // A window that did not time its forward (figures from a calibration file, or an older
  // run) keeps the previous reading: the compute is scaled, nothing is stolen.
  AutoRequest r = request();
  r.overlap = true;
  const AutoMeasurements m = zen4(20e9, 10e-6);
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.exposed_comm_s = 0.4e-3;
  o.step_s = m.compute_s + 5e-3 + o.exposed_comm_s;
  const AutoRevision v = revise_auto(r, m, builtin_accuracy_table(), d.chosen, o);
  EXPECT_EQ(v.link_steal, 0);
  EXPECT_GT(v.compute_factor, 1.2);
}

TEST(AutoRevision, ASwitchMustGainMoreThanTheModelsMargin) {
  // Only the buckets are open (fp32 through the allreduce), the run on 4 MiB buckets, and the
  // link slower than measured: larger buckets are predicted a little faster (fewer launches),
  // by less than min_gain, which is inside the model's error: no switch.
  AutoRequest r = request();
  r.codecs = {"fp32"};
  r.syncs = {"allreduce"};
  const AutoMeasurements m = zen4(20e9, 10e-6);
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  AutoCandidate running;
  for (const auto& k : d.candidates)
    if (k.bucket_kib == 4096) running = k;
  ASSERT_EQ(running.bucket_kib, 4096);
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.exposed_comm_s = 7.45e6 / kOneGbit;
  o.step_s = 13.5e-3 + o.exposed_comm_s;
  const AutoRevision v = revise_auto(r, m, builtin_accuracy_table(), running, o);
  ASSERT_TRUE(v.revised.has_value());
  ASSERT_FALSE(same_configuration(v.revised->chosen, running)) << v.reason;
  EXPECT_EQ(v.outcome, RevisionOutcome::kKept) << v.reason;
  EXPECT_TRUE(same_configuration(v.after, running));
  EXPECT_THAT(v.reason, HasSubstr("under the 5% a switch must gain"));
}

// The window as the running choice's prediction has it: the timing agrees.
AutoObservation as_predicted(const AutoRequest& r, const AutoMeasurements& m,
                             const AutoCandidate& running) {
  const StepEstimate e = predict_candidate(r, m, running);
  AutoObservation o;
  o.first_step = 10;
  o.steps = 20;
  o.step_s = e.step_s;
  o.exposed_comm_s = e.comm_exposed_s;
  return o;
}

// A network of the user's own starts lossless; when its first steps show 1-bit's updates as
// close to the exact ones as the calibration's cases that kept their accuracy, the check
// switches to it even though the timing agreed.
TEST(AutoRevision, AFidelityWithinTheBudgetSwitchesAUsersNetworkToALossyCodec) {
  AutoRequest r = request();
  r.network.family = "";
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  m.fidelity_pending = "measured on the gradients of the run's first 30 steps";
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  ASSERT_TRUE(d.chosen.lossless()) << d.reason;
  const AutoObservation o = as_predicted(r, m, d.chosen);
  m.fidelity_pending.clear();
  m.fidelity = {fidelity("int8", 1e-3, 1.0), fidelity("onebit", 0.003, 0.999)};
  const AutoRevision v = revise_auto(r, m, builtin_accuracy_table(), d.chosen, o);
  EXPECT_EQ(v.outcome, RevisionOutcome::kSwitched) << v.reason;
  EXPECT_EQ(v.after.codec, "onebit");
  EXPECT_THAT(v.reason, HasSubstr("within the model's validated error"));
  EXPECT_THAT(v.reason, HasSubstr("fidelity"));
  const nlohmann::json j = revision_json(v);
  EXPECT_EQ(j["outcome"], "switched");
  EXPECT_EQ(j["after"]["fidelity_verdict"]["risk"], "within");
  // Without fidelity figures the same window changes nothing.
  m.fidelity.clear();
  EXPECT_EQ(revise_auto(r, m, builtin_accuracy_table(), d.chosen, o).outcome,
            RevisionOutcome::kAgrees);
}

// A row put 1-bit first at the start; the run's residual grows, and the check falls back to
// the best option still allowed, however much faster 1-bit would be.
TEST(AutoRevision, AGrowingResidualFallsBackFromTheRowsChoice) {
  AutoRequest r = request();
  r.syncs = {"allreduce"};
  AutoMeasurements m = zen4(kOneGbit, 100e-6);
  const AutoDecision d = decide_auto(r, m, builtin_accuracy_table());
  ASSERT_EQ(d.chosen.codec, "onebit") << d.reason;
  const AutoObservation o = as_predicted(r, m, d.chosen);
  m.fidelity = {fidelity("onebit", 0.1, 0.9, 3.0)};
  const AutoRevision v = revise_auto(r, m, builtin_accuracy_table(), d.chosen, o);
  EXPECT_EQ(v.outcome, RevisionOutcome::kSwitched) << v.reason;
  EXPECT_NE(v.after.codec, "onebit");
  EXPECT_THAT(v.reason, HasSubstr("falling back"));
  // A steady residual keeps it.
  m.fidelity = {fidelity("onebit", 0.1, 0.9, 1.0)};
  EXPECT_EQ(revise_auto(r, m, builtin_accuracy_table(), d.chosen, o).outcome,
            RevisionOutcome::kAgrees);
}

TEST(AutoRevision, AnEmptyWindowIsAnInputError) {
  AutoObservation o;
  o.steps = 0;
  EXPECT_THROW(revise_fast_start(o), InputError);
}

TEST(AccuracyTable, BuiltinRowsNameTheirSourceAndBadRowsAreRefused) {
  const AccuracyTable t = builtin_accuracy_table();
  ASSERT_FALSE(t.rows.empty());
  for (const auto& row : t.rows) EXPECT_THAT(row.source, HasSubstr("bench/")) << row.codec;
  EXPECT_EQ(t.find(NetworkKey{}, "onebit", "allreduce", 0), nullptr);
  EXPECT_EQ(t.find(request().network, "onebit", "bmuf", 4), nullptr);  // only tau 8 measured
  // A version-2 table of one row: its head, then `rest`.
  const auto table_of = [](const char* rest) {
    return fmt::format("format_version = 2\n[[delta]]\nfamily = \"m\"\noptimizer = \"sgd\"\n{}",
                       rest);
  };
  try {
    parse_accuracy_table(table_of("workers = 2\ncodec = \"zip\"\nsync = \"allreduce\"\n"
                                  "points = 1\nsource = \"x\"\n"),
                         "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("acc.toml"));
    EXPECT_THAT(e.what(), HasSubstr("field 'codec'"));
  }
  try {
    parse_accuracy_table(table_of("workers = 2\ncodec = \"int8\"\nsync = \"allreduce\"\n"
                                  "source = \"x\"\n"),
                         "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'points' is missing (or 'bits'"));
  }
  try {  // a row that does not say on how many workers it was measured
    parse_accuracy_table(table_of("codec = \"int8\"\nsync = \"allreduce\"\npoints = 1\n"
                                  "source = \"x\"\n"),
                         "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'workers'"));
  }
  // A version-1 table keyed rows by a reference job's name: refused, saying what changed.
  try {
    parse_accuracy_table("format_version = 1\n", "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("family, optimizer and workers"));
  }
  EXPECT_THROW(parse_accuracy_table("format_version = 4\n", "acc.toml"), InputError);
  try {  // bits came with version 3
    parse_accuracy_table(table_of("workers = 2\ncodec = \"int8\"\nsync = \"allreduce\"\n"
                                  "bits = 0.01\nsource = \"x\"\n"),
                         "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'bits' needs format_version 3"));
  }
  const AccuracyTable neg = parse_accuracy_table(
      table_of("workers = 2\ncodec = \"int8\"\nsync = \"allreduce\"\npoints = -1.5\n"
               "source = \"x\"\n"),
      "acc.toml");
  EXPECT_DOUBLE_EQ(neg.rows.at(0).delta, -1.5);
  EXPECT_DOUBLE_EQ(neg.rows.at(0).loss(), 1.5);
}

// Rows in bits describe token runs: a row matches only a run of its metric, and its loss is
// the bits above fp32's, held against auto.max_bits_delta.
TEST(AutoChoice, RowsInBitsDescribeTokenRuns) {
  const auto row = [](const char* codec, const char* bits) {
    return fmt::format(
        "[[delta]]\nfamily = \"mlp\"\noptimizer = \"sgd_momentum\"\nworkers = 2\n"
        "codec = \"{}\"\nsync = \"allreduce\"\nbits = {}\nsource = \"bench/x\"\n",
        codec, bits);
  };
  AccuracyTable t = parse_accuracy_table(
      "format_version = 3\n" + row("onebit", "0.2") + row("int8", "0.0002"), "acc.toml");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].metric, AccuracyMetric::kBits);
  EXPECT_DOUBLE_EQ(t.rows[0].loss(), 0.2);
  NetworkKey tokens = request().network;
  tokens.metric = AccuracyMetric::kBits;
  EXPECT_EQ(t.find(request().network, "onebit", "allreduce", 0), nullptr);  // a points run
  ASSERT_NE(t.find(tokens, "onebit", "allreduce", 0), nullptr);

  AutoRequest r = request();
  r.network = tokens;
  r.codecs = {"fp32", "onebit", "int8"};
  r.syncs = {"allreduce"};
  r.max_bits_delta = 0.05;
  const AutoDecision d = decide_auto(r, zen4(kOneGbit, 100e-6), t);
  const AutoCandidate* onebit = find(d, "onebit", "allreduce");
  const AutoCandidate* int8 = find(d, "int8", "allreduce");
  ASSERT_TRUE(onebit && int8);
  EXPECT_THAT(onebit->excluded, HasSubstr("+0.2000 bits is over the budget of 0.050 bits"));
  EXPECT_TRUE(int8->excluded.empty()) << int8->excluded;
  ASSERT_TRUE(int8->measured.has_value());
  EXPECT_EQ(int8->measured->metric, AccuracyMetric::kBits);

  try {
    parse_accuracy_table("format_version = 3\n" + row("int8", "0.1") + "points = 1\n", "acc.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'bits' and 'points' are both given"));
  }
}

}  // namespace
}  // namespace loom::perf
