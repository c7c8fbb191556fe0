// Uniform test inputs for the backend's kernels, reproducible from a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/core/rng.h"

namespace loom::testing {

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  Rng rng(seed, 0, RngPurpose::kTest);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

}  // namespace loom::testing
