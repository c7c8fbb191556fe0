#include "loom/nn/layers/linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::kBilinear;
using testing::make_context;
using testing::random_vector;
using testing::Tolerance;

// Linear in x and in the weights separately: a wide step has no truncation error and
// divides the float rounding of the forward by more.
// Linear is bilinear in (x, W), so central differences are exact up to float rounding.
TEST(Linear, GradientsMatchFiniteDifferences) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    Linear layer(5, 4, bias);
    check_layer_gradients(layer, {5}, 3, random_vector(15, 1), make_context(), kBilinear);
  }
}

TEST(Linear, TakesAnyShapeWithTheRightSize) {
  Linear layer(12, 2);
  check_layer_gradients(layer, {3, 2, 2}, 2, random_vector(24, 2), make_context(), kBilinear);
}

TEST(Linear, ForwardIsXWTransposePlusBias) {
  Linear layer(3, 2);
  EXPECT_EQ(layer.build({3}), Shape{2});
  EXPECT_EQ(layer.num_params(), 8);
  // W = [1 2 3; 4 5 6] (row-major [out, in]), b = [0.5, -1].
  std::vector<float> params = {1, 2, 3, 4, 5, 6, 0.5f, -1}, grads(8);
  layer.bind(params.data(), grads.data());
  const std::vector<float> x = {1, 0, -1, 2, 1, 1};
  std::vector<float> y(4);
  layer.forward(make_context(), x.data(), y.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{-1.5f, -3, 7.5f, 18}));
}

TEST(Linear, InitIsDeterministicAndBounded) {
  Linear a(100, 7), b(100, 7);
  a.build({100});
  b.build({100});
  std::vector<float> pa(size_t(a.num_params())), pb(pa.size()), g(pa.size());
  a.bind(pa.data(), g.data());
  b.bind(pb.data(), g.data());
  Rng ra(5, 0, RngPurpose::kInit, 1), rb(5, 0, RngPurpose::kInit, 1);
  a.init_params(ra, cpu_backend());
  b.init_params(rb, cpu_backend());
  EXPECT_EQ(pa, pb);
  const float bound = 1.0f / std::sqrt(100.0f);
  float lo = 1, hi = -1;
  for (float v : pa) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.8f * bound);  // spans the range (707 draws)
  EXPECT_GT(hi, 0.8f * bound);
}

TEST(Linear, BadSizesAreConfigErrors) {
  EXPECT_THROW(Linear(0, 3), ConfigError);
  EXPECT_THROW(Linear(3, -1), ConfigError);
  Linear layer(4, 2);
  try {
    layer.build({5});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Linear(4 -> 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::nn
