// ReLU, Dropout, Flatten: gradient checks and their forward behaviour.
#include "loom/nn/layers/activation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::make_context;
using testing::random_vector;
using testing::Tolerance;

TEST(ReLU, GradientsMatchFiniteDifferencesAwayFromZero) {
  // Inputs at least 0.1 from the kink, step 0.01: no difference straddles it.
  std::vector<float> x = random_vector(24, 3, 0.1f, 1.0f);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -x[i];
  ReLU layer;
  check_layer_gradients(layer, {2, 3, 2}, 2, x, make_context(), Tolerance{});
}

TEST(Flatten, GradientsAndShape) {
  Flatten layer;
  check_layer_gradients(layer, {2, 3, 4}, 3, random_vector(72, 4), make_context(), Tolerance{});
  Flatten f;
  EXPECT_EQ(f.build({2, 3, 4}), Shape{24});
}

TEST(Dropout, GradientsMatchFiniteDifferencesWithAFixedKey) {
  // Training mode: the mask is a pure function of (key, layer index, sample index), so every
  // forward of the difference quotient draws the same mask.
  Dropout layer(0.4f);
  const Context ctx = make_context(true, derive_key(1, 0, RngPurpose::kDropout, 3), 8, 2);
  check_layer_gradients(layer, {10}, 4, random_vector(40, 5), ctx, Tolerance{});
}

TEST(Dropout, TrainingDropsAndScalesEvaluationPassesThrough) {
  const int64_t features = 1000, batch = 20;
  Dropout layer(0.25f);
  layer.build({features});
  const std::vector<float> x = random_vector(features * batch, 6, 0.5f, 1.0f);
  std::vector<float> y(x.size());
  layer.forward(make_context(false), x.data(), y.data(), batch);
  EXPECT_EQ(y, x);

  layer.forward(make_context(true, 77), x.data(), y.data(), batch);
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      ASSERT_EQ(y[i], x[i] * (1.0f / 0.75f)) << i;
    }
  }
  // 20000 draws at keep rate 0.75: standard deviation 0.003.
  EXPECT_NEAR(double(kept) / double(x.size()), 0.75, 0.015);

  // Backward passes the gradient through the same mask, scaled.
  const std::vector<float> dy(x.size(), 1.0f);
  std::vector<float> dx(x.size());
  layer.backward(make_context(true, 77), x.data(), y.data(), dy.data(), dx.data(), batch);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(dx[i], y[i] != 0.0f ? 1.0f / 0.75f : 0.0f) << i;
}

TEST(Dropout, MaskDependsOnKeyLayerAndSampleButNotOnTheSplit) {
  const int64_t features = 37, batch = 8;
  const std::vector<float> x = random_vector(features * batch, 7, 0.5f, 1.0f);
  const uint64_t key = derive_key(3, 0, RngPurpose::kDropout, 11);
  Dropout whole(0.5f), half(0.5f);
  whole.build({features});
  half.build({features});
  std::vector<float> y(x.size()), y_split(x.size());
  whole.forward(make_context(true, key, 0, 1), x.data(), y.data(), batch);
  // Samples 0..3 and 4..7 run as two calls with sample_offset 0 and 4: the same bits.
  half.forward(make_context(true, key, 0, 1), x.data(), y_split.data(), 4);
  half.forward(make_context(true, key, 4, 1), x.data() + 4 * features,
               y_split.data() + 4 * features, 4);
  EXPECT_EQ(y_split, y);

  std::vector<float> other(x.size());
  whole.forward(make_context(true, key, 0, 2), x.data(), other.data(), batch);
  EXPECT_NE(other, y) << "another layer index must draw another mask";
  whole.forward(make_context(true, key + 1, 0, 1), x.data(), other.data(), batch);
  EXPECT_NE(other, y) << "another step key must draw another mask";
  whole.forward(make_context(true, key, 8, 1), x.data(), other.data(), batch);
  EXPECT_NE(other, y) << "other samples must draw other masks";
}

TEST(Dropout, ZeroRateIsIdentityAndBadRatesAreConfigErrors) {
  Dropout layer(0.0f);
  layer.build({5});
  const std::vector<float> x = random_vector(10, 8);
  std::vector<float> y(10);
  layer.forward(make_context(true, 1), x.data(), y.data(), 2);
  EXPECT_EQ(y, x);
  EXPECT_THROW(Dropout(1.0f), ConfigError);
  EXPECT_THROW(Dropout(-0.1f), ConfigError);
  EXPECT_THROW(Dropout(std::nanf("")), ConfigError);
}

}  // namespace
}  // namespace loom::nn
