// A sweep file (`loom sweep SWEEP.toml`): which config keys to vary over a base config, how,
// and where the trials go. Layout (docs/sweep.md):
//
//   base = "mlp.toml"             # optional, relative to the sweep file
//   mode = "grid"                 # or "random" (then `trials` draws, seeded by `seed`)
//   metric = "val_acc"            # summary.json / last metrics.jsonl key that ranks trials
//   goal = "max"                  # or "min" (default: min for *loss* and *_s, else max)
//   slots = 2                     # trials at once (default: cores / cores_per_slot, or GPUs)
//   cores_per_slot = 1            # CPU slots: each trial pinned to its own cores
//   gpus = [0, 1]                 # GPU slots: one trial per GPU through CUDA_VISIBLE_DEVICES
//   dir = "sweeps/lr"             # default: sweeps/<sweep file stem>
//   timeout_s = 600               # a trial running longer is killed and recorded failed
//   [set]                         # fixed overrides of every trial
//   epochs = 1
//   [grid]                        # key = list of values; the grid is their product
//   codec = ["fp32", "int8"]
//   "optim.lr" = [0.05, 0.1]
//   [uniform]                     # random mode: key = [lo, hi] (integers if both are)
//   [log_uniform]                 # random mode: key = [lo, hi], drawn uniform in log space
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/config_value.h"

namespace loom::experiments {

struct SweepRange {
  std::string key;
  double lo = 0, hi = 0;
  bool integer = false, log = false;
};

struct SweepSpec {
  std::string path;  // the sweep file
  std::string base;  // base config file, "" = defaults only
  std::string dir;   // sweep output directory
  std::string mode = "grid";
  std::string metric = "val_acc";
  bool maximize = true;
  int64_t trials = 0;  // random mode
  uint64_t seed = 0;
  int64_t slots = 0;  // 0 = derive from cores or gpus
  int64_t cores_per_slot = 1;
  std::vector<int64_t> gpus;
  double timeout_s = 0;                                    // 0 = none
  std::vector<std::pair<std::string, std::string>> fixed;  // [set]: key, TOML value text // [set]
  std::vector<std::pair<std::string, std::vector<ConfigScalar>>> grid;  // [grid]
  std::vector<SweepRange> ranges;                                       // [uniform], [log_uniform]
  // The metric is a validation figure and neither the sweep nor its base config set
  // data.validation: `fixed` holds data.validation = kSweepValidation.
  bool validation_added = false;
};

// The fraction of each trial's training data a sweep holds out for validation when the metric
// is a validation figure and nothing sets data.validation: enough records for a figure whose
// noise is below the differences a sweep looks for (6000 of Fashion-MNIST's 60000).
inline constexpr const char* kSweepValidation = "0.1";

// Whether `metric` is a figure of the validation split (val_acc, val_loss, best_val_acc, ...).
bool ranks_by_validation(const std::string& metric);

// One trial: a name ("t007") and the overrides it adds on top of the base config.
struct Trial {
  int64_t index = 0;
  std::string name;
  std::vector<std::pair<std::string, ConfigScalar>> overrides;  // swept keys only, in order
  // "codec=\"int8\" optim.lr=0.1": identifies the trial across resumes.
  std::string key() const;
};

// Reads and validates a sweep file: unknown top-level keys, swept or fixed keys that `loom
// train` does not know (train_config_keys()), keys a sweep owns (output.dir), an empty grid,
// and ranges that make no sense are ConfigErrors naming the file, line and key. A test-set
// metric (test_acc, test_loss) is refused: choosing by the test set leaks it. A validation
// metric makes every trial hold out a validation split (kSweepValidation unless the sweep or
// its base config sets data.validation; 0 there is refused).
SweepSpec load_sweep(const std::string& path);
// The same for a sweep file's text (`path` names it in errors; `base` is relative to it).
SweepSpec parse_sweep(const std::string& text, const std::string& path);

// The trials in a fixed order: grid mode gives the product (last key varies fastest); random
// mode draws `trials` points from Rng(seed). Same spec, same trials.
std::vector<Trial> expand_trials(const SweepSpec& spec);

// The default goal for a metric: minimise losses and times, maximise the rest.
bool default_maximize(const std::string& metric);

}  // namespace loom::experiments
