#include "loom/nn/layers/activation.h"

#include "loom/core/error.h"

namespace loom::nn {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_text(const Shape& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

Shape ReLU::build(const Shape& input) {
  features_ = numel(input);
  return input;
}

void ReLU::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->relu_forward(x, y, batch * features_);
}

void ReLU::backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                    int64_t batch) {
  if (dx) ctx.backend->relu_backward(y, dy, dx, batch * features_);
}

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.0f && p < 1.0f))
    throw ConfigError(fmt::format("Dropout: probability {} must be in [0, 1)", p));
}

std::string Dropout::describe() const {
  return fmt::format("Dropout(p={})", p_);
}

Shape Dropout::build(const Shape& input) {
  features_ = numel(input);
  return input;
}

void Dropout::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t n = batch * features_;
  if (!ctx.training || p_ == 0.0f) {
    ctx.backend->copy(y, x, size_t(n) * sizeof(float));
    return;
  }
  if (mask_.size() < n) mask_ = DeviceBuffer<uint8_t>(*ctx.backend, n);
  const uint64_t key = mix64(ctx.dropout_key ^ uint64_t(ctx.layer_index));
  ctx.backend->dropout_forward(x, y, mask_.data(), n, p_, key,
                               uint64_t(ctx.sample_offset) * uint64_t(features_));
}

void Dropout::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                       float* dx, int64_t batch) {
  if (!dx) return;
  const int64_t n = batch * features_;
  if (!ctx.training || p_ == 0.0f) {
    ctx.backend->copy(dx, dy, size_t(n) * sizeof(float));
    return;
  }
  ctx.backend->dropout_backward(dy, mask_.data(), dx, n, p_);
}

Shape Flatten::build(const Shape& input) {
  features_ = numel(input);
  return {features_};
}

void Flatten::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->copy(y, x, size_t(batch * features_) * sizeof(float));
}

void Flatten::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                       float* dx, int64_t batch) {
  if (dx) ctx.backend->copy(dx, dy, size_t(batch * features_) * sizeof(float));
}

}  // namespace loom::nn
