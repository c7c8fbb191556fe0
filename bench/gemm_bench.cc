// GEMM libraries on the MLP's training shapes, one thread: oneDNN's matmul primitive (loom's
// choice) and its dnnl_sgemm, OpenBLAS as the loader picks its kernels (set OPENBLAS_CORETYPE
// to force others), and Eigen compiled for AVX2/FMA. docs/gemm.md records the figures and the
// choice.
//   build/gemm_bench --benchmark_counters_tabular=true
//   OPENBLAS_CORETYPE=Prescott build/gemm_bench --benchmark_filter=OpenBLAS
#include <benchmark/benchmark.h>
#include <fmt/format.h>

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

}  // namespace

BENCHMARK(BM_OneDnn)->DenseRange(0, 7);
BENCHMARK(BM_OneDnnSgemm)->DenseRange(0, 7);
BENCHMARK(BM_OpenBlas)->DenseRange(0, 7);
BENCHMARK(BM_Eigen)->DenseRange(0, 7);
BENCHMARK_MAIN();
