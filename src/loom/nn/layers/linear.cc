#include "loom/nn/layers/linear.h"

#include <cmath>
#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features), bias_(bias) {
  if (in_ <= 0 || out_ <= 0 || in_ > (int64_t(1) << 24) || out_ > (int64_t(1) << 24))
    throw ConfigError(fmt::format("Linear({} -> {}): widths must be in [1, 2^24]", in_, out_));
}

std::string Linear::describe() const {
  return fmt::format("Linear({} -> {})", in_, out_);
}

Shape Linear::build(const Shape& input) {
  if (input.size() >= 2 && input.back() == in_ && numel(input) != in_) {
    rows_ = numel(input) / in_;
    Shape out = input;
    out.back() = out_;
    return out;
  }
  if (numel(input) != in_)
    throw ConfigError(fmt::format("{}: input has {} features per sample ({}), expected {}",
                                  describe(), numel(input), shape_text(input), in_));
  rows_ = 1;
  return {out_};
}

void Linear::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = bias_ ? params + in_ * out_ : nullptr;
  db_ = bias_ ? grads + in_ * out_ : nullptr;
}

void Linear::init_params(Rng& rng, Backend& backend) {
  const float bound = 1.0f / std::sqrt(float(in_));
  std::vector<float> host(static_cast<size_t>(num_params()));
  for (float& v : host) v = (2.0f * rng.uniform() - 1.0f) * bound;
  backend.copy_to_device(w_, host.data(), host.size() * sizeof(float));
}

void Linear::forward(const Context& ctx, const float* x, float* y, int64_t samples) {
  const int64_t batch = samples * rows_;
  ctx.backend->gemm(false, true, batch, out_, in_, 1.0f, x, in_, w_, in_, 0.0f, y, out_);
  if (bias_) ctx.backend->add_bias(y, b_, batch, out_);
}

void Linear::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                      float* dx, int64_t samples) {
  const int64_t batch = samples * rows_;
  Backend& be = *ctx.backend;
  be.gemm(true, false, out_, in_, batch, 1.0f, dy, out_, x, in_, 0.0f, dw_, in_);  // dW = dy^T x
  if (bias_) be.sum_rows(dy, db_, batch, out_);
  if (dx) be.gemm(false, false, batch, in_, out_, 1.0f, dy, out_, w_, in_, 0.0f, dx, in_);
}

}  // namespace loom::nn
