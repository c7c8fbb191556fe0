// The training loop's own settings (threads, batch, epochs, precision, ...), read once from the
// run's config by read_settings, with their ranges.
#pragma once

#include <cstdint>
#include <string>

#include "loom/core/config.h"
#include "loom/tensor/backend.h"
#include "loom/train/model_histograms.h"
#include "loom/train/progress.h"

namespace loom::train {

struct Settings {
  int64_t threads, batch, epochs, max_steps, prefetch;
  int64_t accumulate;  // micro-batches of `batch` per step, one synchronisation per step
  int64_t log_every;   // a "step" line in metrics.jsonl every this many steps (0 = none)
  uint64_t seed;
  bool eval, shuffle;
  bool keep_best;  // train.keep_best
  std::string data_dir;
  ProgressMode progress;
  HistogramOptions histograms;  // train.histograms
  Precision precision;          // of the layers' matrix products (docs/precision.md)
};

// train.histograms and train.histogram_every (ConfigError naming the key when out of range, or
// set where it does not apply).
HistogramOptions read_histogram_options(const Config& cfg);

// ConfigError naming the key for a value out of range, or a precision this backend cannot run.
Settings read_settings(const Config& cfg);

}  // namespace loom::train
