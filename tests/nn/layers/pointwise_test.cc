// LeakyReLU, GELU, SiLU, Tanh and Sigmoid against PyTorch's values (tests/data/nn) and by
// finite differences; ReLU6, Hardsigmoid and Hardswish against their definitions (PyTorch's
// formulas) and by finite differences.
#include "loom/nn/layers/pointwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "nn/grad_check.h"
#include "nn/reference_data.h"

namespace loom::nn {
namespace {

std::unique_ptr<Layer> make(const std::string& name, float slope) {
  if (name == "leaky_relu") return std::make_unique<LeakyReLU>(slope);
  if (name == "gelu") return std::make_unique<GELU>();
  if (name == "silu") return std::make_unique<SiLU>();
  if (name == "tanh") return std::make_unique<Tanh>();
  if (name == "relu6") return std::make_unique<ReLU6>();
  if (name == "hardsigmoid") return std::make_unique<HardSigmoid>();
  if (name == "hardswish") return std::make_unique<HardSwish>();
  return std::make_unique<Sigmoid>();
}

class ActivationReference : public ::testing::TestWithParam<const char*> {};

TEST_P(ActivationReference, MatchesPyTorch) {
  const auto ref = testing::load_reference(GetParam());
  const float slope = ref.attrs.count("slope") ? float(ref.attr("slope")) : 0.0f;
  auto layer = make(GetParam(), slope);
  const auto run = testing::run_layer(*layer, ref, {}, {});
  // Elementwise: only the float32 rounding of one function value (and of exp/erf inside).
  testing::expect_matches("y", run.y, ref.tensor("y"), 2e-6, 1e-7);
  testing::expect_matches("dx", run.dx, ref.tensor("dx"), 2e-6, 1e-7);
}

INSTANTIATE_TEST_SUITE_P(PyTorch, ActivationReference,
                         ::testing::Values("leaky_relu", "gelu", "silu", "tanh", "sigmoid"));

TEST(Activations, KindsAreClassNames) {
  EXPECT_EQ(LeakyReLU().kind(), "LeakyReLU");
  EXPECT_EQ(LeakyReLU().slope(), 0.01f);
  EXPECT_EQ(GELU().kind(), "GELU");
  EXPECT_EQ(SiLU().kind(), "SiLU");
  EXPECT_EQ(Tanh().kind(), "Tanh");
  EXPECT_EQ(Sigmoid().kind(), "Sigmoid");
  EXPECT_THROW(LeakyReLU(std::numeric_limits<float>::infinity()), ConfigError);
}

// The smooth activations' central difference has truncation error h^2 |f'''| / 6: with
// |f'''| <= 2 (tanh at 0) and h = 1e-2 that is <= 3.4e-5 absolute, within rtol = 1e-3 of
// derivatives that size (where f' is small, f''' is too: tanh at 3 has f' ~ 1e-2, f''' ~ 5e-2).
// The float32 forward rounds y (|y| <= 3) by <= 1.8e-7 per side, which over 2h adds <= 2e-5
// absolute: atol = 5e-5. A wrong derivative (a dropped term) is off by far more, >= 1e-2.
constexpr testing::Tolerance kSmooth{1e-2, 1e-3, 5e-5};

TEST(Activations, GradientsOfSmoothOnes) {
  const auto x = testing::random_vector(2 * 30, 51, -3.0f, 3.0f);
  for (const char* name : {"gelu", "silu", "tanh", "sigmoid"}) {
    SCOPED_TRACE(name);
    auto layer = make(name, 0.0f);
    testing::check_layer_gradients(*layer, {30}, 2, x, testing::make_context(), kSmooth);
  }
}

// Piecewise linear: exact away from the kink at 0, which the inputs keep clear of by >= 0.05.
// GELU's backward reads Phi(x) back from the forward's y / x: at x = 0 and where x Phi(x)
// underflows that quotient is replaced, and everywhere the gradient is the derivative.
TEST(Activations, GeluGradientHoldsAtZeroAndInTheTails) {
  const std::vector<float> x = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-3f,   -0.7f, 2.5f,
                                -6.0f, -12.0f, -13.5f, -20.0f,  -100.0f, 40.0f, 1e4f};
  const int64_t n = int64_t(x.size());
  std::vector<float> y(x.size()), dy(x.size(), 1.0f), dx(x.size());
  Backend& be = cpu_backend();
  be.activation_forward(Activation::kGelu, 0.0f, x.data(), y.data(), n);
  be.activation_backward(Activation::kGelu, 0.0f, x.data(), y.data(), dy.data(), dx.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    const double want = 0.5 * std::erfc(-xd / std::sqrt(2.0)) +
                        xd * std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    ASSERT_TRUE(std::isfinite(dx[i])) << "x = " << x[i];
    EXPECT_NEAR(dx[i], want, 2e-6 * std::fabs(want) + 1e-30) << "x = " << x[i];
  }
}

TEST(Activations, GradientsOfLeakyReLU) {
  auto x = testing::random_vector(2 * 3 * 4, 52, -2.0f, 2.0f);
  for (float& v : x)
    if (std::fabs(v) < 0.05f) v += 0.1f;
  LeakyReLU layer(0.2f);
  testing::check_layer_gradients(layer, {3, 4}, 2, x, testing::make_context(),
                                 testing::Tolerance{});
}

// The piecewise ones, value by value on points chosen on every piece and at the ends (where
// PyTorch's gradients take the outer piece's value): y and dx against PyTorch's definitions.
TEST(Activations, PiecewiseOnesFollowPyTorchsDefinitions) {
  const std::vector<float> x = {-7, -3, -2.5f, -0.5f, 0, 0.5f, 2.5f, 3, 5.5f, 6, 8};
  struct Case {
    const char* name;
    float (*y)(float);
    float (*dy)(float);
  };
  const Case cases[] = {
      {"relu6", [](float v) { return std::min(std::max(v, 0.0f), 6.0f); },
       [](float v) { return v > 0 && v < 6 ? 1.0f : 0.0f; }},
      {"hardsigmoid", [](float v) { return std::min(std::max(v / 6 + 0.5f, 0.0f), 1.0f); },
       [](float v) { return v > -3 && v < 3 ? 1.0f / 6 : 0.0f; }},
      {"hardswish", [](float v) { return v * std::min(std::max(v / 6 + 0.5f, 0.0f), 1.0f); },
       [](float v) { return v < -3  ? 0.0f
                            : v > 3 ? 1.0f
                                    : v / 3 + 0.5f; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto layer = make(c.name, 0.0f);
    layer->build({int64_t(x.size())});
    Context ctx = testing::make_context();
    std::vector<float> y(x.size()), dx(x.size()), ones(x.size(), 1.0f);
    layer->forward(ctx, x.data(), y.data(), 1);
    layer->backward(ctx, x.data(), y.data(), ones.data(), dx.data(), 1);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(y[i], c.y(x[i]), 1e-6f) << "x = " << x[i];
      EXPECT_NEAR(dx[i], c.dy(x[i]), 1e-6f) << "x = " << x[i];
    }
  }
  EXPECT_EQ(ReLU6().kind(), "ReLU6");
  EXPECT_EQ(HardSigmoid().kind(), "Hardsigmoid");
  EXPECT_EQ(HardSwish().kind(), "Hardswish");
}

// Away from the kinks (0 and 6; -3 and 3) by >= 0.05, the finite differences agree: within
// Hardswish's quadratic piece its central difference is exact up to float rounding.
TEST(Activations, GradientsOfPiecewiseOnes) {
  auto x = testing::random_vector(2 * 40, 53, -8.0f, 8.0f);
  for (float& v : x)
    for (float kink : {-3.0f, 0.0f, 3.0f, 6.0f})
      if (std::fabs(v - kink) < 0.05f) v = kink + 0.1f;
  for (const char* name : {"relu6", "hardsigmoid", "hardswish"}) {
    SCOPED_TRACE(name);
    auto layer = make(name, 0.0f);
    testing::check_layer_gradients(*layer, {40}, 2, x, testing::make_context(), kSmooth);
  }
}

}  // namespace
}  // namespace loom::nn
