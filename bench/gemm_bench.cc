// GEMM libraries on the MLP's training shapes, one thread (and, BM_NnAlignment, the one shape
// whose speed depends on where B lies): oneDNN's matmul primitive (loom's
// choice) and its dnnl_sgemm, OpenBLAS as the loader picks its kernels (set OPENBLAS_CORETYPE
// to force others), and Eigen compiled for AVX2/FMA. docs/gemm.md records the figures and the
// choice.
//   build/gemm_bench --benchmark_counters_tabular=true
//   OPENBLAS_CORETYPE=Prescott build/gemm_bench --benchmark_filter=OpenBLAS
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdint>
#include <eigen3/Eigen/Core>
#include <vector>

#include "loom/tensor/cpu/gemm.h"

namespace {

struct Shape {
  bool ta, tb;
  int64_t m, n, k;
};
// The eight GEMMs of one training step of 784-1024-1024-10 at batch 128: forward,
// weight-gradient and input-gradient products of each layer (the first layer needs no input
// gradient).
const Shape kShapes[] = {{false, true, 128, 1024, 784},   {true, false, 1024, 784, 128},
                         {false, true, 128, 1024, 1024},  {true, false, 1024, 1024, 128},
                         {false, false, 128, 1024, 1024}, {false, true, 128, 10, 1024},
                         {true, false, 10, 1024, 128},    {false, false, 128, 1024, 10}};

void run_loom(benchmark::State& state, loom::cpu::GemmLibrary lib) {
  loom::cpu::set_gemm_threads(1);
  const Shape s = kShapes[state.range(0)];
  loom::cpu::set_gemm_library(lib);
  std::vector<float> a(size_t(s.m * s.k), 0.5f), b(size_t(s.k * s.n), 0.25f), c(size_t(s.m * s.n));
  for (auto _ : state)
    loom::cpu::sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), s.ta ? s.m : s.k, b.data(),
                     s.tb ? s.k : s.n, 0.0f, c.data(), s.n);
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(s.m * s.n * s.k) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("{}{} {}x{}x{}", s.ta ? "T" : "N", s.tb ? "T" : "N", s.m, s.n, s.k));
}

void BM_OneDnn(benchmark::State& state) {
  run_loom(state, loom::cpu::GemmLibrary::kOneDnn);
}
void BM_OneDnnSgemm(benchmark::State& state) {
  run_loom(state, loom::cpu::GemmLibrary::kOneDnnSgemm);
}
void BM_OpenBlas(benchmark::State& state) {
  run_loom(state, loom::cpu::GemmLibrary::kOpenBlas);
}

void BM_Eigen(benchmark::State& state) {
  Eigen::setNbThreads(1);
  const Shape s = kShapes[state.range(0)];
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Constant(s.ta ? s.k : s.m, s.ta ? s.m : s.k, 0.5f);
  M b = M::Constant(s.tb ? s.n : s.k, s.tb ? s.k : s.n, 0.25f);
  M c(s.m, s.n);
  for (auto _ : state) {
    if (s.ta)
      c.noalias() = a.transpose() * b;
    else if (s.tb)
      c.noalias() = a * b.transpose();
    else
      c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(s.m * s.n * s.k) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// The backward pass's dX = dY W (NN, 128 x 1024 x 1024) with W `offset` bytes past a 4 KiB
// boundary: oneDNN's sgemm as it is (library 1), and loom's oneDNN matmul path (library 0),
// which hands a 32-byte aligned B over as a copy off that alignment on AVX2 (onednn_matmul.cc).
void BM_NnAlignment(benchmark::State& state) {
  loom::cpu::set_gemm_threads(1);
  loom::cpu::set_gemm_library(state.range(1) == 0 ? loom::cpu::GemmLibrary::kOneDnn
                                                  : loom::cpu::GemmLibrary::kOneDnnSgemm);
  const int64_t m = 128, n = 1024, k = 1024;
  const size_t offset = size_t(state.range(0));
  std::vector<float> a(size_t(m * k), 0.5f), c(size_t(m * n));
  std::vector<float> storage(size_t(k * n) + 2048);
  const uintptr_t start = reinterpret_cast<uintptr_t>(storage.data());
  float* b = reinterpret_cast<float*>((start + 4095) / 4096 * 4096 + offset);
  std::fill(b, b + k * n, 0.25f);
  for (auto _ : state)
    loom::cpu::sgemm(false, false, m, n, k, 1.0f, a.data(), k, b, n, 0.0f, c.data(), n);
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(m * n * k) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("{} B+{}", state.range(1) == 0 ? "matmul" : "sgemm", offset));
}

}  // namespace

BENCHMARK(BM_NnAlignment)->ArgsProduct({{0, 16, 32, 64}, {0, 1}});
BENCHMARK(BM_OneDnn)->DenseRange(0, 7);
BENCHMARK(BM_OneDnnSgemm)->DenseRange(0, 7);
BENCHMARK(BM_OpenBlas)->DenseRange(0, 7);
BENCHMARK(BM_Eigen)->DenseRange(0, 7);
BENCHMARK_MAIN();
