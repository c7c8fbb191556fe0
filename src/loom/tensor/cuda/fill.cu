#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void fill(cudaStream_t s, float* x, int64_t n, float value) {
  launch_1d(s, n, [=] __device__(int64_t i) { x[i] = value; });
}

}  // namespace loom::cuda
