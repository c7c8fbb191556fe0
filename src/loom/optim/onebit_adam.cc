#include "loom/optim/onebit_adam.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/core/error.h"

namespace loom::optim {

OnebitAdam::OnebitAdam(Backend& backend, int64_t num_params, float beta1, float beta2, float eps,
                       float weight_decay)
    : backend_(&backend),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      m_(backend, num_params),
      v_(backend, num_params) {
  if (backend.device() != Device::kCpu)
    throw ConfigError(
        "optim.name = \"onebit_adam\" keeps its frozen stage in host memory: not available with "
        "parameters in device memory (backend = \"cuda\")");
}

std::string OnebitAdam::describe() const {
  return fmt::format(
      "1-bit Adam(beta1={}, beta2={}, eps={}, weight_decay={} decoupled; variance frozen after "
      "step {})",
      beta1_, beta2_, eps_, weight_decay_, freeze_step_);
}

void OnebitAdam::set_freeze_step(int64_t step) {
  LOOM_CHECK(step >= 1, "1-bit Adam needs at least one step of Adam before its freeze, got {}",
             step);
  freeze_step_ = step;
}

void OnebitAdam::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  LOOM_CHECK(steps_ > 0, "OnebitAdam::update before advance()");
  LOOM_CHECK(freeze_step_ >= 1, "OnebitAdam::update before set_freeze_step()");
  if (!frozen()) {
    backend_->adam_update(params, grads, m_.data() + offset, v_.data() + offset, n, lr, beta1_,
                          beta2_, eps_, weight_decay_, true, steps_);
    return;
  }
  float* m = m_.data() + offset;
  for (int64_t i = 0; i < n; ++i) m[i] = beta1_ * m[i] + (1.0f - beta1_) * grads[i];
  apply_momentum(params, m, offset, n, lr);
}

void OnebitAdam::momentum_to_send(float* send, int64_t offset, int64_t n, int world) const {
  const float* m = m_.data() + offset;
  const float carried = beta1_ / float(world);
  for (int64_t i = 0; i < n; ++i) send[i] = carried * m[i] + (1.0f - beta1_) * send[i];
}

float OnebitAdam::adam_step_bound(float beta1, float beta2) {
  const double b1 = beta1, b2 = beta2;
  if (b2 <= 0 || b1 * b1 >= b2) return std::numeric_limits<float>::infinity();
  return static_cast<float>((1 - b1) / std::sqrt((1 - b2) * (1 - b1 * b1 / b2)));
}

void OnebitAdam::apply_momentum(float* params, const float* momentum, int64_t offset, int64_t n,
                                float lr) {
  LOOM_CHECK(frozen(), "OnebitAdam::apply_momentum at step {}, before the freeze after step {}",
             steps_, freeze_step_);
  const float c1 = 1.0f / (1.0f - std::pow(beta1_, float(steps_)));
  const float c2 = 1.0f / (1.0f - std::pow(beta2_, float(freeze_step_)));
  const float shrink = 1.0f - lr * weight_decay_;
  const float bound = adam_step_bound(beta1_, beta2_);
  float* m = m_.data() + offset;
  const float* v = v_.data() + offset;
  for (int64_t i = 0; i < n; ++i) {
    m[i] = momentum[i];
    const float step = (m[i] * c1) / (std::sqrt(v[i] * c2) + eps_);
    params[i] = params[i] * shrink - lr * std::clamp(step, -bound, bound);
  }
}

void OnebitAdam::reset_state() {
  steps_ = 0;
  backend_->fill(m_.data(), m_.size(), 0.0f);
  backend_->fill(v_.data(), v_.size(), 0.0f);
}

std::vector<StateBuffer> OnebitAdam::state() {
  // Names of their own: an Adam checkpoint resumed as 1-bit Adam (or back) is refused.
  return {{"onebit_adam_m", m_.data(), m_.size()}, {"onebit_adam_v", v_.data(), v_.size()}};
}

}  // namespace loom::optim
