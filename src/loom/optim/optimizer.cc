#include "loom/optim/optimizer.h"

#include <fmt/format.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/optim/onebit_adam.h"

namespace loom::optim {

Sgd::Sgd(Backend& backend, int64_t num_params, float momentum, float weight_decay, bool nesterov)
    : backend_(&backend), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
  if (momentum_ != 0.0f) velocity_ = DeviceBuffer<float>(backend, num_params);
}

std::string Sgd::describe() const {
  return fmt::format("SGD(momentum={}, nesterov={}, weight_decay={})", momentum_, nesterov_,
                     weight_decay_);
}

void Sgd::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  float* v = velocity_.data() ? velocity_.data() + offset : nullptr;
  backend_->sgd_update(params, grads, v, n, lr, momentum_, weight_decay_, nesterov_);
}

void Sgd::reset_state() {
  if (velocity_.data()) backend_->fill(velocity_.data(), velocity_.size(), 0.0f);
}

std::vector<StateBuffer> Sgd::state() {
  if (!velocity_.data()) return {};
  return {{"velocity", velocity_.data(), velocity_.size()}};
}

Adam::Adam(Backend& backend, int64_t num_params, float beta1, float beta2, float eps,
           float weight_decay, bool decoupled)
    : backend_(&backend),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      m_(backend, num_params),
      v_(backend, num_params) {}

std::string Adam::describe() const {
  return fmt::format("Adam{}(beta1={}, beta2={}, eps={}, weight_decay={})", decoupled_ ? "W" : "",
                     beta1_, beta2_, eps_, weight_decay_);
}

void Adam::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  LOOM_CHECK(steps_ > 0, "Adam::update before advance()");
  backend_->adam_update(params, grads, m_.data() + offset, v_.data() + offset, n, lr, beta1_,
                        beta2_, eps_, weight_decay_, decoupled_, steps_);
}

void Adam::reset_state() {
  steps_ = 0;  // fresh moments need fresh bias correction
  backend_->fill(m_.data(), m_.size(), 0.0f);
  backend_->fill(v_.data(), v_.size(), 0.0f);
}

std::vector<StateBuffer> Adam::state() {
  return {{"adam_m", m_.data(), m_.size()}, {"adam_v", v_.data(), v_.size()}};
}

std::vector<ConfigKeySpec> optimizer_config_keys() {
  return {
      {"optim.name", ConfigType::kString, "\"sgd\"",
       "\"sgd\", \"adam\" or \"onebit_adam\" (1-bit Adam: AdamW for codec.warmup_steps, then the "
       "variance frozen and the momentum exchanged through the codec, onebit unless set; "
       "sync = \"allreduce\")"},
      {"optim.lr", ConfigType::kDouble, "0.05", "base learning rate"},
      {"optim.momentum", ConfigType::kDouble, "0.9", "SGD momentum"},
      {"optim.nesterov", ConfigType::kBool, "false", "Nesterov momentum (SGD)"},
      {"optim.weight_decay", ConfigType::kDouble, "0", "L2 weight decay"},
      {"optim.beta1", ConfigType::kDouble, "0.9", "Adam (and 1-bit Adam) beta1"},
      {"optim.beta2", ConfigType::kDouble, "0.999", "Adam beta2"},
      {"optim.eps", ConfigType::kDouble, "1e-8", "Adam epsilon"},
      {"optim.decoupled", ConfigType::kBool, "false", "decoupled weight decay (AdamW)"},
      {"optim.clip_norm", ConfigType::kDouble, "off",
       "clip the global gradient norm (the combined gradient over all workers, as decoded "
       "with a codec) to this (> 0); sync = \"allreduce\" on host memory"},
  };
}

double squared_norm(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

float clip_factor(double squared, float clip_norm) {
  const double norm = std::sqrt(squared);
  return norm > double(clip_norm) ? float(double(clip_norm) / norm) : 1.0f;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, Backend& backend,
                                          int64_t num_params) {
  if (o.name == "sgd")
    return std::make_unique<Sgd>(backend, num_params, o.momentum, o.weight_decay, o.nesterov);
  if (o.name == "adam")
    return std::make_unique<Adam>(backend, num_params, o.beta1, o.beta2, o.eps, o.weight_decay,
                                  o.decoupled);
  if (o.name == "onebit_adam")
    return std::make_unique<OnebitAdam>(backend, num_params, o.beta1, o.beta2, o.eps,
                                        o.weight_decay);
  throw ConfigError(
      fmt::format("optim.name: unknown optimizer \"{}\" (sgd, adam or onebit_adam)", o.name));
}

}  // namespace loom::optim
