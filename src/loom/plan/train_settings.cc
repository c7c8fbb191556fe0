#include "loom/plan/train_settings.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/data/sources/dataset.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::plan {

namespace {

// `precision`: fp32, bf16 where the CPU backend can run it, fp16 with backend = "cuda" (whose
// backend answers for itself when the workers start).
Precision read_precision(const Config& cfg) {
  const std::string name = cfg.get_choice("precision", "fp32", {"fp32", "bf16", "fp16"});
  const Precision p = name == "bf16"   ? Precision::kBf16
                      : name == "fp16" ? Precision::kFp16
                                       : Precision::kFp32;
  const bool cuda = cfg.get_string("backend", "cpu") == "cuda";
  std::string why;
  if (p == Precision::kFp16 && !cuda)
    why = "fp16 runs with backend = \"cuda\" only";
  else if (!cuda)
    why = cpu_backend().matmul_precision_unsupported(p);
  if (!why.empty())
    throw ConfigError(
        fmt::format("{}: key 'precision': \"{}\": {}", cfg.where("precision"), name, why));
  return p;
}

}  // namespace

HistogramOptions read_histogram_options(const Config& cfg) {
  HistogramOptions o;
  o.enabled = cfg.get_bool("train.histograms", false);
  o.every = cfg.get_int("train.histogram_every", 100, 1, int64_t(1) << 40);
  if (!o.enabled)
    refuse_unless_default(cfg, "train.histogram_every", int64_t(100),
                          fmt::format("spaces the histograms of train.histograms, which is "
                                      "false ({})",
                                      cfg.where("train.histograms")));
  if (o.enabled && read_output_dir(cfg).empty())
    refuse_key(cfg, "train.histograms",
               fmt::format("histograms go to output.dir/tb/, and output.dir is \"\" ({})",
                           cfg.where("output.dir")));
  return o;
}

int64_t read_threads(const Config& cfg) {
  return cfg.get_int("threads", 1, 1, 256);
}

std::string read_output_dir(const Config& cfg) {
  return cfg.get_string("output.dir", "runs/latest");
}

std::string read_data_dir(const Config& cfg) {
  return cfg.get_string("data.dir", data::kDefaultFashionMnistDir);
}

TrainSettings read_train_settings(const Config& cfg) {
  TrainSettings s;
  s.threads = read_threads(cfg);
  s.batch = read_batch(cfg);
  s.accumulate = read_accumulate(cfg);
  s.epochs = cfg.get_int("epochs", 3, 1, 100000);
  s.max_steps = cfg.get_int("max_steps", 0, 0, int64_t(1) << 40);
  s.prefetch = cfg.get_int("data.prefetch", 2, 0, 1024);
  s.log_every = cfg.get_int("train.log_every", 50, 0, int64_t(1) << 40);
  s.seed = uint64_t(cfg.get_int("seed", 0, 0, INT64_MAX));
  s.eval = cfg.get_bool("eval", true);
  s.shuffle = cfg.get_bool("data.shuffle", true);
  s.keep_best = cfg.get_bool("train.keep_best", false);
  s.keep_best_where = cfg.where("train.keep_best");
  s.data_dir = read_data_dir(cfg);
  s.progress = parse_progress_mode(cfg.get_string("progress", "auto"));
  s.histograms = read_histogram_options(cfg);
  s.precision = read_precision(cfg);
  return s;
}

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "bar") return ProgressMode::kBar;
  if (name == "lines") return ProgressMode::kLines;
  if (name == "none") return ProgressMode::kNone;
  if (name == "auto") return ProgressMode::kAuto;
  throw ConfigError(
      fmt::format("key 'progress': unknown mode \"{}\" (bar, lines, none, auto)", name));
}

GuardOptions read_guard_options(const Config& cfg) {
  GuardOptions o;
  o.every_steps = cfg.get_int("train.checkpoint_every", 0, 0, int64_t(1) << 40);
  o.every_minutes = cfg.get_double("train.checkpoint_minutes", 0, 0, 1e7);
  o.keep = int(cfg.get_int("train.checkpoint_keep", 3, 1, 1000000));
  o.resume = cfg.get_string("train.resume", "");
  o.nan_policy = cfg.get_choice("train.nan_policy", "abort", {"abort", "skip"}) == "skip"
                     ? NanPolicy::kSkip
                     : NanPolicy::kAbort;
  o.nan_lr_factor = cfg.get_double("train.nan_lr_factor", 0.5, 1e-6, 1.0);
  o.nan_max_skips = cfg.get_int("train.nan_max_skips", 5, 0, int64_t(1) << 40);
  o.check_grads = cfg.get_bool("train.nan_check_grads", true);
  o.loss_scaling = read_loss_scaler_options(cfg);
  if (o.nan_policy == NanPolicy::kAbort) {
    const std::string why = fmt::format(
        "applies to train.nan_policy = \"skip\"; it is \"abort\" ({}): the first bad step stops "
        "the run",
        cfg.where("train.nan_policy"));
    refuse_unless_default(cfg, "train.nan_lr_factor", 0.5, why);
    refuse_unless_default(cfg, "train.nan_max_skips", int64_t(5), why);
  }
  const std::string out = read_output_dir(cfg);
  if (out.empty())
    refuse_unless_default(cfg, "train.checkpoint_keep", int64_t(3),
                          fmt::format("checkpoints go to output.dir/checkpoints/, and output.dir "
                                      "is \"\" ({})",
                                      cfg.where("output.dir")));
  if (!out.empty()) o.checkpoint_root = (std::filesystem::path(out) / "checkpoints").string();
  if (out.empty() && (o.every_steps > 0 || o.every_minutes > 0))
    refuse_key(cfg, o.every_steps > 0 ? "train.checkpoint_every" : "train.checkpoint_minutes",
               fmt::format("checkpoints need an output directory, and output.dir is \"\" ({})",
                           cfg.where("output.dir")));
  return o;
}

std::vector<ConfigKeySpec> checkpoint_config_keys() {
  return {
      {"train.checkpoint_every", ConfigType::kInt, "0",
       "write a checkpoint every this many steps into <output.dir>/checkpoints (0 = off)"},
      {"train.checkpoint_minutes", ConfigType::kDouble, "0",
       "also write one when this many minutes passed since the last (0 = off)"},
      {"train.checkpoint_keep", ConfigType::kInt, "3", "complete checkpoints kept (newest)"},
      {"train.resume", ConfigType::kString, "\"\"",
       "resume from the newest checkpoint under this directory (loom train --resume DIR)"},
      {"train.nan_policy", ConfigType::kString, "\"abort\"",
       "NaN/Inf in loss or gradients: \"abort\" (exit 4 naming step, rank, layer) or \"skip\" "
       "(roll the step back and lower the learning rate)"},
      {"train.nan_lr_factor", ConfigType::kDouble, "0.5",
       "skip policy: learning rate scale multiplied by this per skipped step"},
      {"train.nan_max_skips", ConfigType::kInt, "5",
       "skip policy: consecutive skipped steps before giving up (exit 4)"},
      {"train.nan_check_grads", ConfigType::kBool, "true",
       "check every gradient for NaN/Inf during backward (else the loss only)"},
  };
}

}  // namespace loom::plan
