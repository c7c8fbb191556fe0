#include "loom/nn/layers/attention_parts.h"

#include <fmt/format.h>

#include <algorithm>

#include "loom/core/error.h"

namespace loom::nn {

Shape MatMul::build(const Shape& input) {
  throw ConfigError(fmt::format("MatMul of one input {}: it needs two", shape_text(input)));
}

Shape MatMul::build_inputs(const std::vector<Shape>& inputs) {
  if (inputs.size() != 2)
    throw ConfigError(fmt::format("MatMul takes two inputs, got {}", inputs.size()));
  const Shape& a = inputs[0];
  const Shape& b = inputs[1];
  const size_t r = a.size();
  Shape out = output_shape(a, b);
  if (out.empty())
    throw ConfigError(
        fmt::format("MatMul: {} times {} is not [..., M, K] times [..., K, N] with "
                    "the same leading axes",
                    shape_text(a), shape_text(b)));
  m_ = a[r - 2];
  k_ = a[r - 1];
  n_ = b[r - 1];
  count_ = 1;
  for (size_t i = 0; i + 2 < r; ++i) count_ *= a[i];
  return out;
}

void MatMul::forward(const Context&, const float*, float*, int64_t) {
  throw ConfigError("MatMul called with one input");
}

void MatMul::backward(const Context&, const float*, const float*, const float*, float*, int64_t) {
  throw ConfigError("MatMul called with one input");
}

void MatMul::forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                            int64_t batch) {
  ctx.backend->gemm_batched(false, false, m_, n_, k_, 1.0f, xs[0], k_, m_ * k_, xs[1], n_, k_ * n_,
                            0.0f, y, n_, m_ * n_, batch * count_);
}

void MatMul::backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float*,
                             const float* dy, const std::vector<float*>& dxs, int64_t batch) {
  Backend& be = *ctx.backend;
  // dA = dY B^T, dB = A^T dY, each per matrix of the batch.
  if (dxs[0])
    be.gemm_batched(false, true, m_, k_, n_, 1.0f, dy, n_, m_ * n_, xs[1], n_, k_ * n_, 0.0f,
                    dxs[0], k_, m_ * k_, batch * count_);
  if (dxs[1])
    be.gemm_batched(true, false, k_, n_, m_, 1.0f, xs[0], k_, m_ * k_, dy, n_, m_ * n_, 0.0f,
                    dxs[1], n_, k_ * n_, batch * count_);
}

std::string Softmax::describe() const {
  return causal_ ? "Softmax(causal=true)" : "Softmax";
}

Shape Softmax::build(const Shape& input) {
  if (input.empty()) throw ConfigError("Softmax: the input has no axis");
  cols_ = input.back();
  rows_ = numel(input) / cols_;
  if (causal_ && (input.size() < 2 || input[input.size() - 2] != cols_))
    throw ConfigError(
        fmt::format("Softmax: causal needs square [..., t, t] blocks, not {}", shape_text(input)));
  return input;
}

void Softmax::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  if (causal_)
    ctx.backend->causal_softmax_forward(x, y, batch * rows_ / cols_, cols_);
  else
    ctx.backend->softmax_forward(x, y, batch * rows_, cols_);
}

void Softmax::backward(const Context& ctx, const float*, const float* y, const float* dy, float* dx,
                       int64_t batch) {
  if (!dx) return;
  if (causal_)
    ctx.backend->causal_softmax_backward(y, dy, dx, batch * rows_ / cols_, cols_);
  else
    ctx.backend->softmax_backward(y, dy, dx, batch * rows_, cols_);
}

std::string Scale::describe() const {
  return fmt::format("Scale({:.7g})", factor_);
}

Shape Scale::build(const Shape& input) {
  features_ = numel(input);
  return input;
}

void Scale::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t n = batch * features_;
  ctx.backend->copy(y, x, size_t(n) * sizeof(float));
  ctx.backend->scale(n, factor_, y);
}

void Scale::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                     int64_t batch) {
  if (!dx) return;
  const int64_t n = batch * features_;
  ctx.backend->copy(dx, dy, size_t(n) * sizeof(float));
  ctx.backend->scale(n, factor_, dx);
}

}  // namespace loom::nn
