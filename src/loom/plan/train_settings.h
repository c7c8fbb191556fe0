// The training loop's own settings, as the run plan reads them from a run's config: threads,
// batch, epochs, precision, progress and histograms (TrainSettings), and checkpoints, resume
// and the handling of non-finite steps (GuardOptions). train/ runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/optim/loss_scaler.h"
#include "loom/tensor/backend.h"

namespace loom::plan {

// progress: "auto" (a bar on a terminal, lines in a log), "bar", "lines" or "none".
enum class ProgressMode { kAuto, kBar, kLines, kNone };

// train.histograms and train.histogram_every.
struct HistogramOptions {
  bool enabled = false;
  int64_t every = 100;  // steps
  bool due(int64_t steps_done) const { return enabled && steps_done % every == 0; }
};

struct TrainSettings {
  int64_t threads, batch, epochs, max_steps, prefetch;
  int64_t accumulate;  // micro-batches of `batch` per step, one synchronisation per step
  int64_t log_every;   // a "step" line in metrics.jsonl every this many steps (0 = none)
  uint64_t seed;
  bool eval, shuffle;
  bool keep_best;  // train.keep_best
  std::string keep_best_where;
  std::string data_dir;
  ProgressMode progress;
  HistogramOptions histograms;  // train.histograms
  Precision precision;          // of the layers' matrix products (docs/precision.md)
};

enum class NanPolicy { kAbort, kSkip };

struct GuardOptions {
  std::string checkpoint_root;  // <output.dir>/checkpoints; "" = no checkpoints
  int64_t every_steps = 0;      // train.checkpoint_every (0 = off)
  double every_minutes = 0;     // train.checkpoint_minutes (0 = off)
  int keep = 3;                 // train.checkpoint_keep
  std::string resume;           // train.resume (set by `loom train --resume DIR`)
  NanPolicy nan_policy = NanPolicy::kAbort;
  double nan_lr_factor = 0.5;  // train.nan_lr_factor: lr scale *= this per skipped step
  int64_t nan_max_skips = 5;   // train.nan_max_skips: consecutive skips before aborting
  bool check_grads = true;     // train.nan_check_grads
  std::optional<optim::LossScalerOptions> loss_scaling;  // loss_scale.*; nullopt: none
  bool checkpoints() const {
    return !checkpoint_root.empty() && (every_steps > 0 || every_minutes > 0);
  }
};

// The `progress` key: "auto", "bar", "lines" or "none"; ConfigError naming the key otherwise.
ProgressMode parse_progress_mode(const std::string& name);

// train.histograms and train.histogram_every (ConfigError naming the key when out of range, or
// set where it does not apply).
HistogramOptions read_histogram_options(const Config& cfg);

// ConfigError naming the key for a value out of range, or a precision this backend cannot run.
TrainSettings read_train_settings(const Config& cfg);
// threads: each worker's intra-op threads, [1, 256].
int64_t read_threads(const Config& cfg);
// output.dir as given ("runs/latest" by default; "" writes nothing).
std::string read_output_dir(const Config& cfg);
// data.dir: the IDX directory (Fashion-MNIST's by default).
std::string read_data_dir(const Config& cfg);

// train.checkpoint_*, train.resume, train.nan_* and loss_scale.*.
GuardOptions read_guard_options(const Config& cfg);

// Keys: train.checkpoint_every, train.checkpoint_minutes, train.checkpoint_keep, train.resume,
// train.nan_policy, train.nan_lr_factor, train.nan_max_skips, train.nan_check_grads.
std::vector<ConfigKeySpec> checkpoint_config_keys();

}  // namespace loom::plan
