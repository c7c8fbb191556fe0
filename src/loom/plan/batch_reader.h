// `batch`, the samples each worker computes per micro-batch, and train.accumulate: read here once,
// with one range, for the training loop, checkpoints, the cost model and every command that
// predicts a run.
#pragma once

#include <cstdint>

#include "loom/core/config.h"

namespace loom::plan {

inline constexpr int64_t kDefaultBatch = 128;
inline constexpr int64_t kMaxBatch = int64_t(1) << 20;

// ConfigError naming the key and its line outside [1, 2^20].
int64_t read_batch(const Config& cfg);
// train.accumulate, the micro-batches of `batch` per step: [1, 2^20].
int64_t read_accumulate(const Config& cfg);

}  // namespace loom::plan
