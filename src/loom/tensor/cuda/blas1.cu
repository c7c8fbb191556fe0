// Level-1 updates. Written as plain loops (not cuBLAS saxpy) so they need no handle and queue
// on whatever stream the caller names.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void axpy(cudaStream_t s, int64_t n, float alpha, const float* x, float* y) {
  launch_1d(s, n, [=] __device__(int64_t i) { y[i] += alpha * x[i]; });
}

void scale(cudaStream_t s, int64_t n, float alpha, float* x) {
  launch_1d(s, n, [=] __device__(int64_t i) { x[i] *= alpha; });
}

}  // namespace loom::cuda
