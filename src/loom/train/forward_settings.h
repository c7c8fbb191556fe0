// How a finished model's forward runs outside training (`loom eval`, `loom predict`, the Python
// package's predict and evaluate): in chunks of one size, with the intra-op threads set the same
// way. oneDNN picks GEMM kernels and blockings by shape and thread count, so sharing both is
// what makes eval and predict, the CLI and Python, give the same bits (docs/determinism.md).
#pragma once

#include <cstdint>

#include "loom/tensor/backend.h"

namespace loom::train {

// Samples (token windows: positions) per forward.
inline constexpr int64_t kForwardPositions = 1000;

// Samples per forward for a model with `positions_per_sample` outputs per sample: as many as
// make kForwardPositions, at least 1.
int64_t forward_chunk(int64_t positions_per_sample);

// Sets `requested` intra-op threads on `backend` for the calling thread (0: every core), which
// also flushes denormals there as training's workers do, and returns the count.
int use_forward_threads(Backend& backend, int requested);

}  // namespace loom::train
