#include "loom/plan/optim_reader.h"

#include <fmt/format.h>

#include <string>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

namespace loom::plan {

optim::OptimizerOptions read_optimizer_options(const Config& cfg) {
  const std::string name = cfg.get_choice("optim.name", "sgd", {"sgd", "adam", "onebit_adam"});
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
  optim::OptimizerOptions o;
  o.name = name;
  o.weight_decay = wd;
  if (name == "sgd") {
    o.momentum = float(cfg.get_double("optim.momentum", 0.9, 0.0, 0.999999));
    o.nesterov = cfg.get_bool("optim.nesterov", false);
  } else {
    o.beta1 = float(cfg.get_double("optim.beta1", 0.9, 0.0, 0.999999));
    o.beta2 = float(cfg.get_double("optim.beta2", 0.999, 0.0, 0.99999999));
    o.eps = float(cfg.get_double("optim.eps", 1e-8, 1e-30, 1.0));
    o.decoupled = cfg.get_bool("optim.decoupled", false);
  }
  if (name == "onebit_adam") {
    // 1-bit Adam decays weights as AdamW does (optim/onebit_adam.h).
    if (cfg.has("optim.decoupled") && !o.decoupled)
      throw ConfigError(fmt::format(
          "{}: key 'optim.decoupled': false; 1-bit Adam decays weights decoupled, as AdamW "
          "({})",
          cfg.where("optim.decoupled"), chosen));
    o.decoupled = true;
  }
  return o;
}

optim::LrScheduleOptions read_lr_schedule_options(const Config& cfg) {
  const std::string kind =
      cfg.get_choice("lr.schedule", "constant", {"constant", "step", "cosine"});
  const double lr = cfg.get_double("optim.lr", 0.05, 1e-12, 1e3);
  // A schedule's own parameters shape no other schedule.
  const std::string chosen =
      fmt::format("lr.schedule is \"{}\" ({})", kind, cfg.where("lr.schedule"));
  if (kind != "step") {
    refuse_unless_default(cfg, "lr.step_epochs", 10.0,
                          "a parameter of lr.schedule = \"step\"; " + chosen);
    refuse_unless_default(cfg, "lr.gamma", 0.1, "a parameter of lr.schedule = \"step\"; " + chosen);
  }
  if (kind != "cosine")
    refuse_unless_default(cfg, "lr.min", 0.0, "a parameter of lr.schedule = \"cosine\"; " + chosen);
  using Kind = optim::LrSchedule::Kind;
  optim::LrScheduleOptions o;
  o.kind = kind == "step" ? Kind::kStep : kind == "cosine" ? Kind::kCosine : Kind::kConstant;
  o.lr = lr;
  o.warmup_epochs = cfg.get_double("lr.warmup_epochs", 0.0, 0.0, 1e6);
  o.step_epochs = cfg.get_double("lr.step_epochs", 10.0, 1e-6, 1e6);
  o.gamma = cfg.get_double("lr.gamma", 0.1, 0.0, 1.0);
  o.min_lr = cfg.get_double("lr.min", 0.0, 0.0, lr);
  return o;
}

std::optional<optim::LossScalerOptions> read_loss_scaler_options(const Config& cfg) {
  const std::string mode = cfg.get_choice("loss_scale.mode", "auto", {"auto", "dynamic", "none"});
  const bool on =
      mode == "dynamic" || (mode == "auto" && cfg.get_string("precision", "fp32") == "fp16");
  optim::LossScalerOptions o;
  if (!on) {
    // The scale's parameters would shape nothing: no scale is kept.
    const std::string why = fmt::format(
        "loss scaling is off (loss_scale.mode \"{}\" ({}){}); set loss_scale.mode = \"dynamic\" "
        "to scale",
        mode, cfg.where("loss_scale.mode"), mode == "auto" ? ", with precision not fp16" : "");
    refuse_unless_default(cfg, "loss_scale.initial", double(o.initial), why);
    refuse_unless_default(cfg, "loss_scale.growth_interval", o.growth_interval, why);
    refuse_unless_default(cfg, "loss_scale.min", double(o.min_scale), why);
    refuse_unless_default(cfg, "loss_scale.max", double(o.max_scale), why);
    return std::nullopt;
  }
  o.initial = float(cfg.get_double("loss_scale.initial", o.initial, 1e-30, 1e30));
  o.growth_interval =
      cfg.get_int("loss_scale.growth_interval", o.growth_interval, 1, int64_t(1) << 40);
  o.min_scale = float(cfg.get_double("loss_scale.min", o.min_scale, 1e-30, 1e30));
  o.max_scale = float(cfg.get_double("loss_scale.max", o.max_scale, 1e-30, 1e30));
  if (o.min_scale > o.max_scale || o.initial < o.min_scale || o.initial > o.max_scale)
    throw ConfigError(
        fmt::format("{}: loss_scale.initial {} must lie in [loss_scale.min {}, loss_scale.max {}]",
                    cfg.where("loss_scale.initial"), o.initial, o.min_scale, o.max_scale));
  return o;
}

float read_clip_norm(const Config& cfg) {
  if (!cfg.has("optim.clip_norm")) return 0.0f;
  const double c = cfg.get_double("optim.clip_norm", 0.0);
  if (!(c > 0.0 && c <= 1e30))
    throw ConfigError(
        fmt::format("{}: key 'optim.clip_norm': {} must be > 0 (leave the key out "
                    "for no clipping)",
                    cfg.where("optim.clip_norm"), c));
  return float(c);
}

}  // namespace loom::plan
