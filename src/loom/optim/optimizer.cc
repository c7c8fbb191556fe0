#include "loom/optim/optimizer.h"

#include <fmt/format.h>

#include <cmath>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

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
      {"optim.name", ConfigType::kString, "\"sgd\"", "\"sgd\" or \"adam\""},
      {"optim.lr", ConfigType::kDouble, "0.05", "base learning rate"},
      {"optim.momentum", ConfigType::kDouble, "0.9", "SGD momentum"},
      {"optim.nesterov", ConfigType::kBool, "false", "Nesterov momentum (SGD)"},
      {"optim.weight_decay", ConfigType::kDouble, "0", "L2 weight decay"},
      {"optim.beta1", ConfigType::kDouble, "0.9", "Adam beta1"},
      {"optim.beta2", ConfigType::kDouble, "0.999", "Adam beta2"},
      {"optim.eps", ConfigType::kDouble, "1e-8", "Adam epsilon"},
      {"optim.decoupled", ConfigType::kBool, "false", "decoupled weight decay (AdamW)"},
      {"optim.clip_norm", ConfigType::kDouble, "off",
       "clip the global gradient norm (the combined gradient over all workers, as decoded "
       "with a codec) to this (> 0); sync = \"allreduce\" on host memory"},
  };
}

float clip_norm_from_config(const Config& cfg) {
  if (!cfg.has("optim.clip_norm")) return 0.0f;
  const double c = cfg.get_double("optim.clip_norm", 0.0);
  if (!(c > 0.0 && c <= 1e30))
    throw ConfigError(
        fmt::format("{}: key 'optim.clip_norm': {} must be > 0 (leave the key out "
                    "for no clipping)",
                    cfg.where("optim.clip_norm"), c));
  return float(c);
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

std::unique_ptr<Optimizer> make_optimizer(const Config& cfg, Backend& backend, int64_t num_params) {
  const std::string name = cfg.get_choice("optim.name", "sgd", {"sgd", "adam"});
  const float wd = float(cfg.get_double("optim.weight_decay", 0.0, 0.0, 1.0));
  // Each optimizer's own keys mean nothing to the other one.
  const std::string chosen =
      fmt::format("optim.name is \"{}\" ({})", name, cfg.where("optim.name"));
  if (name == "sgd") {
    const std::string why = "an Adam option; " + chosen;
    refuse_unless_default(cfg, "optim.beta1", 0.9, why);
    refuse_unless_default(cfg, "optim.beta2", 0.999, why);
    refuse_unless_default(cfg, "optim.eps", 1e-8, why);
    refuse_unless_default(cfg, "optim.decoupled", false, why);
  } else {
    refuse_unless_default(cfg, "optim.momentum", 0.9,
                          "an SGD option; " + chosen + ", whose momentum is optim.beta1");
    refuse_unless_default(cfg, "optim.nesterov", false, "an SGD option; " + chosen);
  }
  if (name == "sgd") {
    return std::make_unique<Sgd>(backend, num_params,
                                 float(cfg.get_double("optim.momentum", 0.9, 0.0, 0.999999)), wd,
                                 cfg.get_bool("optim.nesterov", false));
  }
  return std::make_unique<Adam>(backend, num_params,
                                float(cfg.get_double("optim.beta1", 0.9, 0.0, 0.999999)),
                                float(cfg.get_double("optim.beta2", 0.999, 0.0, 0.99999999)),
                                float(cfg.get_double("optim.eps", 1e-8, 1e-30, 1.0)), wd,
                                cfg.get_bool("optim.decoupled", false));
}

}  // namespace loom::optim
