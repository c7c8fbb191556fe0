#include "loom/tensor/cpu/gemm_probe.h"

#include <algorithm>

#include "loom/core/timer.h"

namespace loom::cpu {

GemmProbe probe_gemm(const std::vector<GemmShape>& shapes, GemmLibrary lib, int repeats) {
  const GemmLibrary saved = gemm_library();
  set_gemm_library(lib);
  struct Buffers {
    std::vector<float> a, b, c;
  };
  std::vector<Buffers> bufs;
  GemmProbe probe;
  for (const auto& s : shapes) {
    bufs.push_back({std::vector<float>(size_t(s.m * s.k), 0.01f),
                    std::vector<float>(size_t(s.k * s.n), 0.02f),
                    std::vector<float>(size_t(s.m * s.n), 0.0f)});
    probe.flops += s.flops();
  }
  std::vector<double> times;
  for (int rep = -1; rep < repeats; ++rep) {
    Stopwatch w;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto& s = shapes[i];
      const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
      sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, bufs[i].a.data(), lda, bufs[i].b.data(), ldb,
            0.0f, bufs[i].c.data(), s.n);
    }
    if (rep >= 0) times.push_back(w.seconds());
  }
  std::sort(times.begin(), times.end());
  probe.seconds = times[times.size() / 2];
  set_gemm_library(saved);
  return probe;
}

std::vector<GemmShape> mlp_step_gemms(const std::vector<int64_t>& widths, int64_t batch) {
  std::vector<GemmShape> shapes;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], out = widths[l + 1];
    shapes.push_back({false, true, batch, out, in});              // y = x W^T
    shapes.push_back({true, false, out, in, batch});              // dW = dy^T x
    if (l > 0) shapes.push_back({false, false, batch, in, out});  // dx = dy W
  }
  return shapes;
}

}  // namespace loom::cpu
