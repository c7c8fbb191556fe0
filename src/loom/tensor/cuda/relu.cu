// ReLU forward and backward: exact (a select, no arithmetic), so bit-identical to the CPU.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void relu_forward(cudaStream_t s, const float* x, float* y, int64_t n) {
  launch_1d(s, n, [=] __device__(int64_t i) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  });
}

void relu_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n) {
  launch_1d(s, n, [=] __device__(int64_t i) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; });
}

}  // namespace loom::cuda
