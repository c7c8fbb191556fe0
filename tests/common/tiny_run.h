// Shared set-up for tests that drive the whole training loop (loom::train::run_training):
// a short, quiet run of a small MLP on Fashion-MNIST that writes nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
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

// A small residual CNN as [[layer]] tables: conv (stride 2) + BatchNorm + ReLU, then a conv +
// BatchNorm added back ("join"), then flatten and two dense layers. A graph that branches,
// has non-trained state (16 floats), and ends in a chain that model parallelism can split.
// Its graph part has 40 + 8 + 148 + 8 = 204 parameters, in front of the dense layers'.
// tests/common/tiny_residual.toml, read once.
inline const std::string kTinyResidualGraph = [] {
  std::ifstream f(std::string(LOOM_SOURCE_DIR) + "/tests/common/tiny_residual.toml");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}();

// `base` training kTinyResidualGraph instead of its MLP.
inline Config with_tiny_residual_graph(const Config& base) {
  Config cfg = Config::from_string(kTinyResidualGraph, "tiny_residual_graph.toml");
  for (const auto& [key, value] : base.values())
    if (key.rfind("mlp.", 0) != 0) cfg.set(key, value.value, value.where);
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
