// Shared set-up for tests that drive the whole training loop (loom::train::run_training):
// a short, quiet run of a small MLP on Fashion-MNIST that writes nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/config.h"

namespace loom::testing {

// `steps` steps of `workers` workers x `batch` samples, MLP 784-64-32-10, no evaluation.
inline Config tiny_run(int workers, int batch, int steps) {
  Config cfg;
  cfg.set("workers", int64_t(workers));
  cfg.set("batch", int64_t(batch));
  cfg.set("max_steps", int64_t(steps));
  cfg.set("epochs", int64_t(1));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("output.dir", std::string(""));
  cfg.set_override("mlp.hidden=[64, 32]");
  return cfg;
}

// Largest element-wise |a - b|; a size mismatch fails the test (and returns NaN, which no
// comparison passes).
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size()) return NAN;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace loom::testing
