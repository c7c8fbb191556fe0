// NaN/Inf detection: a value is non-finite when its exponent bits are all ones. Threads that
// find one store 1 into the flag (a benign race: every writer writes the same value).
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void find_non_finite(cudaStream_t s, const float* x, int64_t n, int* flag) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(x);
  launch_1d(s, n, [=] __device__(int64_t i) {
    if ((bits[i] & 0x7f800000u) == 0x7f800000u) *flag = 1;
  });
}

}  // namespace loom::cuda
