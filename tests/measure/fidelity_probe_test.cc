// The fidelity replay (measure/fidelity_probe.h) on a recorded sequence of gradients: a steady
// direction with noise, its coordinates spanning three orders of magnitude, as a network's
// layers do. The exact codec follows the exact run bit for bit; error feedback keeps 1-bit
// close under SGD with momentum and not without it; under Adam the same 1-bit codec drifts
// far (its variance sees every coordinate at the same magnitude), which is what the
// calibration must see.
#include "loom/measure/fidelity_probe.h"

#include <gtest/gtest.h>

#include <random>

#include "loom/compress/registry.h"

namespace loom::measure {
namespace {

constexpr int64_t kRows = 16, kCols = 8, kBias = 64;
constexpr int64_t kN = kRows * kCols + kBias;

std::vector<std::vector<float>> recorded_gradients(int steps) {
  std::mt19937 gen(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> mean(kN);
  for (int64_t i = 0; i < kN; ++i) mean[size_t(i)] = std::pow(10.0f, -3.0f * float(i % 11) / 10);
  std::vector<std::vector<float>> g(static_cast<size_t>(steps), std::vector<float>(kN));
  for (auto& step : g)
    for (int64_t i = 0; i < kN; ++i) step[size_t(i)] = mean[size_t(i)] * (1.0f + 0.5f * noise(gen));
  return g;
}

std::vector<FidelitySegment> segments() {
  return {{0, kRows * kCols, {{size_t(kRows), size_t(kCols)}}}, {kRows * kCols, kBias, {}}};
}

compress::CodecOptions codec(const std::string& name, bool error_feedback = true) {
  compress::CodecOptions o;
  o.name = name;
  o.error_feedback = error_feedback;
  o.params = compress::codec_kind(name).default_params();
  return o;
}

std::vector<perf::CodecFidelity> replay(const std::vector<compress::CodecOptions>& codecs,
                                        const optim::OptimizerOptions& opt, int steps = 40,
                                        int64_t max_elements = 0) {
  std::vector<float> params(kN, 0.5f);
  FidelityProbe probe(codecs, opt, params, segments(), max_elements);
  for (const auto& g : recorded_gradients(steps)) probe.record(g, 0.01f);
  EXPECT_EQ(probe.steps(), steps);
  return probe.figures();
}

optim::OptimizerOptions sgd_momentum() {
  optim::OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9f;
  return o;
}

optim::OptimizerOptions adamw() {
  optim::OptimizerOptions o;
  o.name = "adam";
  o.decoupled = true;
  o.weight_decay = 0.01f;
  return o;
}

TEST(FidelityProbe, TheExactCodecFollowsTheExactRunBitForBit) {
  for (const auto& opt : {sgd_momentum(), adamw()}) {
    const auto f = replay({codec("fp32")}, opt);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].codec, "fp32");
    EXPECT_EQ(f[0].steps, 40);
    EXPECT_EQ(f[0].drift, 0.0);
    EXPECT_DOUBLE_EQ(f[0].update_cosine, 1.0);
    EXPECT_EQ(f[0].residual, 0.0);
  }
}

TEST(FidelityProbe, FinerCodecsDriftLessAndErrorFeedbackKeepsOneBitClose) {
  const auto f = replay({codec("fp16"), codec("int8"), codec("onebit"), codec("onebit", false)},
                        sgd_momentum());
  ASSERT_EQ(f.size(), 4u);
  EXPECT_LT(f[0].drift, f[1].drift);
  EXPECT_LT(f[1].drift, f[2].drift);
  EXPECT_LT(f[0].drift, 1e-3);
  EXPECT_LT(f[2].drift, 0.5 * f[3].drift) << "with " << f[2].drift << ", without " << f[3].drift;
  EXPECT_GT(f[2].update_cosine, f[3].update_cosine - 0.2);
  EXPECT_GT(f[2].residual, 0.0);         // 1-bit holds back what it did not send
  EXPECT_LT(f[2].residual_growth, 2.0);  // and what it holds stays bounded
}

TEST(FidelityProbe, OneBitThroughAdamDriftsFarWhereThroughMomentumSgdItDoesNot) {
  const double sgd = replay({codec("onebit")}, sgd_momentum())[0].drift;
  const double adam = replay({codec("onebit")}, adamw())[0].drift;
  EXPECT_GT(adam, 2 * sgd) << "SGD " << sgd << ", Adam " << adam;
  // int8 keeps close under either.
  EXPECT_LT(replay({codec("int8")}, adamw())[0].drift, 0.1 * adam);
}

// A large model is replayed on every k-th element of each layer: the figures stay within a
// factor of two of the whole replay's (the calibration's boundary spans a factor of three; a
// block codec on these tiny layers sees a quarter of a block, where a real layer fills
// many), and the exact codec still follows the exact run exactly.
TEST(FidelityProbe, ASampleOfEachLayerGivesTheWholeReplaysFigures) {
  std::vector<float> params(kN, 0.5f);
  FidelityProbe probe({codec("fp32")}, sgd_momentum(), params, segments(), kN / 4);
  EXPECT_EQ(probe.stride(), 4);
  EXPECT_EQ(probe.sampled(), kRows * kCols / 4 + kBias / 4);
  for (const auto& g : recorded_gradients(10)) probe.record(g, 0.01f);
  EXPECT_EQ(probe.figures()[0].drift, 0.0);
  for (const auto& opt : {sgd_momentum(), adamw()}) {
    const auto whole = replay({codec("int8"), codec("onebit")}, opt);
    const auto sample = replay({codec("int8"), codec("onebit")}, opt, 40, kN / 4);
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_GT(sample[i].drift, 0.5 * whole[i].drift) << whole[i].codec;
      EXPECT_LT(sample[i].drift, 2.0 * whole[i].drift) << whole[i].codec;
      EXPECT_NEAR(sample[i].update_cosine, whole[i].update_cosine, 0.05) << whole[i].codec;
    }
  }
}

TEST(FidelityProbe, ANonFiniteGradientIsSkipped) {
  std::vector<float> params(kN, 0.0f);
  FidelityProbe probe({codec("int8")}, sgd_momentum(), params, segments());
  std::vector<float> g = recorded_gradients(1)[0];
  g[3] = NAN;
  probe.record(g, 0.1f);
  EXPECT_EQ(probe.steps(), 0);
  EXPECT_EQ(probe.figures()[0].drift, 0.0);
}

}  // namespace
}  // namespace loom::measure
