#include "loom/nn/layers/layernorm.h"

#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

LayerNorm::LayerNorm(float eps) : eps_(eps) {
  if (!(eps > 0.0f && eps <= 1.0f))
    throw ConfigError(fmt::format("LayerNorm: eps {} must be in (0, 1]", eps));
}

std::string LayerNorm::describe() const {
  return features_ > 0 ? fmt::format("LayerNorm({}, eps={})", features_, eps_)
                       : fmt::format("LayerNorm(eps={})", eps_);
}

Shape LayerNorm::build(const Shape& input) {
  if (input.empty() || input.back() <= 0)
    throw ConfigError(
        fmt::format("LayerNorm: input {} has no last axis to normalise", shape_text(input)));
  features_ = input.back();
  rows_ = numel(input) / features_;
  return input;
}

void LayerNorm::bind(float* params, float* grads) {
  gamma_ = params;
  beta_ = params + features_;
  dgamma_ = grads;
  dbeta_ = grads + features_;
}

void LayerNorm::init_params(Rng&, Backend& backend) {
  backend.fill(gamma_, features_, 1.0f);
  backend.fill(beta_, features_, 0.0f);
}

void LayerNorm::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t rows = batch * rows_;
  if (mean_.size() < rows) {
    mean_ = DeviceBuffer<float>(*ctx.backend, rows);
    rstd_ = DeviceBuffer<float>(*ctx.backend, rows);
  }
  ctx.backend->layernorm_forward(x, rows, features_, eps_, gamma_, beta_, y, mean_.data(),
                                 rstd_.data());
}

void LayerNorm::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  ctx.backend->layernorm_backward(x, dy, batch * rows_, features_, gamma_, mean_.data(),
                                  rstd_.data(), dx, dgamma_, dbeta_);
}

}  // namespace loom::nn
