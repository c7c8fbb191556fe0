// Measures this CPU's GEMM throughput on given shapes, with the library loom uses; the
// benchmarks report it as the ceiling a training step could reach if only its GEMMs ran.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/tensor/cpu/gemm.h"

namespace loom::cpu {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

struct GemmProbe {
  double seconds = 0;  // for one pass over all shapes (median of repeats)
  double flops = 0;    // per pass
  double gflops() const { return seconds > 0 ? flops / seconds * 1e-9 : 0; }
};

// Runs every shape once per pass on the calling thread's intra-op threads, `repeats` passes
// after a warm-up pass, and returns the median pass.
GemmProbe probe_gemm(const std::vector<GemmShape>& shapes, GemmLibrary lib, int repeats = 15);

// The GEMMs of one training step of an MLP with the given layer widths (input first): forward,
// weight gradient, and input gradient for all but the first layer.
std::vector<GemmShape> mlp_step_gemms(const std::vector<int64_t>& widths, int64_t batch);

}  // namespace loom::cpu
