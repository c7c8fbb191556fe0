// Linear and Conv2d with the backend's matrix products in bf16: outputs and every gradient
// (weights, bias, input) close to the fp32 layer's, at bf16's input rounding (relative error of
// order 2^-8 of the norm), and not equal to them (the products did run in bf16).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "loom/core/cpu_features.h"
#include "loom/core/rng.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/linear.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::make_context;
using testing::random_vector;

struct Pass {
  std::vector<float> y, grads, dx;
};

// Forward and backward of `layer` (built and initialised with seed 1) in `precision`.
Pass run(Layer& layer, const Shape& in_shape, int64_t batch, Precision precision) {
  Backend& be = cpu_backend();
  const Shape out_shape = layer.build(in_shape);
  std::vector<float> params(size_t(layer.num_params())), grads(params.size());
  layer.bind(params.data(), grads.data());
  Rng rng(1, 0, RngPurpose::kInit, 1);
  layer.init_params(rng, be);
  const std::vector<float> x = random_vector(numel(in_shape) * batch, 2);
  const std::vector<float> dy = random_vector(numel(out_shape) * batch, 3);
  Pass p;
  p.y.resize(dy.size());
  p.dx.resize(x.size());
  be.set_matmul_precision(precision);
  const Context ctx = make_context(true);
  layer.forward(ctx, x.data(), p.y.data(), batch);
  layer.backward(ctx, x.data(), p.y.data(), dy.data(), p.dx.data(), batch);
  be.set_matmul_precision(Precision::kFp32);
  p.grads = grads;
  return p;
}

// |a - b| / |b| in the 2-norm.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

void expect_close_not_equal(const char* what, const std::vector<float>& bf16,
                            const std::vector<float>& fp32) {
  SCOPED_TRACE(what);
  ASSERT_EQ(bf16.size(), fp32.size());
  const double err = relative_error(bf16, fp32);
  EXPECT_LT(err, std::ldexp(1.0, -7));   // bf16 inputs: 8 significant bits
  EXPECT_GT(err, std::ldexp(1.0, -16));  // fp32 products would agree to ~2^-24
}

TEST(Bf16Layers, LinearGradientsCloseToFp32) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (avx512_bf16)";
  Linear a(96, 40), b(96, 40);
  const Pass f = run(a, {96}, 32, Precision::kFp32);
  const Pass h = run(b, {96}, 32, Precision::kBf16);
  expect_close_not_equal("y", h.y, f.y);
  // Weights then bias: the bias gradient is a sum of dy, which stays fp32 exactly.
  const std::vector<float> dw_h(h.grads.begin(), h.grads.begin() + 96 * 40),
      dw_f(f.grads.begin(), f.grads.begin() + 96 * 40);
  expect_close_not_equal("dW", dw_h, dw_f);
  EXPECT_EQ(std::vector<float>(h.grads.begin() + 96 * 40, h.grads.end()),
            std::vector<float>(f.grads.begin() + 96 * 40, f.grads.end()));
  expect_close_not_equal("dx", h.dx, f.dx);
}

TEST(Bf16Layers, Conv2dGradientsCloseToFp32) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (avx512_bf16)";
  Conv2d a(6, 16, 3, 1, 1), b(6, 16, 3, 1, 1);
  const Shape in{6, 10, 10};
  const Pass f = run(a, in, 4, Precision::kFp32);
  const Pass h = run(b, in, 4, Precision::kBf16);
  expect_close_not_equal("y", h.y, f.y);
  const size_t nw = 16 * 6 * 9;
  expect_close_not_equal("dW", std::vector<float>(h.grads.begin(), h.grads.begin() + nw),
                         std::vector<float>(f.grads.begin(), f.grads.begin() + nw));
  // The bias gradient sums dy in fp32 in both (oneDNN reads dy as bf16 for it, so allow that).
  EXPECT_LT(relative_error(std::vector<float>(h.grads.begin() + nw, h.grads.end()),
                           std::vector<float>(f.grads.begin() + nw, f.grads.end())),
            std::ldexp(1.0, -7));
  expect_close_not_equal("dx", h.dx, f.dx);
}

}  // namespace
}  // namespace loom::nn
