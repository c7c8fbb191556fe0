#include "loom/nn/layers/fixed_bias.h"

namespace loom::nn {

Shape FixedBias::build(const Shape& input) {
  shape_ = input;
  return input;
}

void FixedBias::init_state(Backend& backend) {
  backend.fill(bias_, num_state(), 0.0f);
}

void FixedBias::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t n = numel(shape_);
  ctx.backend->copy(y, x, size_t(batch * n) * sizeof(float));
  ctx.backend->add_bias(y, bias_, batch, n);
}

void FixedBias::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                         int64_t batch) {
  if (dx) ctx.backend->copy(dx, dy, size_t(batch * numel(shape_)) * sizeof(float));
}

}  // namespace loom::nn
