#include "loom/nn/layers/pointwise.h"

#include <cmath>

#include "loom/core/error.h"

namespace loom::nn {

Shape PointwiseActivation::build(const Shape& input) {
  features_ = numel(input);
  return input;
}

void PointwiseActivation::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->activation_forward(kind_, alpha_, x, y, batch * features_);
}

void PointwiseActivation::backward(const Context& ctx, const float* x, const float* y,
                                   const float* dy, float* dx, int64_t batch) {
  if (dx) ctx.backend->activation_backward(kind_, alpha_, x, y, dy, dx, batch * features_);
}

LeakyReLU::LeakyReLU(float slope) : PointwiseActivation(Activation::kLeakyRelu, slope) {
  if (!std::isfinite(slope))
    throw ConfigError(fmt::format("LeakyReLU: negative slope {} is not finite", slope));
}

std::string LeakyReLU::describe() const {
  return fmt::format("LeakyReLU(slope={})", alpha_);
}

}  // namespace loom::nn
