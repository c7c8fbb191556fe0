// The launch helper: kernels are written as "for each index i in [0, n)" bodies and
// launch_1d picks the grid. A grid-stride loop lets one launch cover any n (int64_t) with a
// grid capped at a few waves of the device, and every launch is checked.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "loom/tensor/cuda/cuda_check.h"

namespace loom::cuda {

constexpr int kBlock = 256;
// Enough blocks to fill an H200 (132 SMs x 8 resident blocks of 256) several times over.
constexpr int64_t kMaxBlocks = 132 * 8 * 4;

inline unsigned blocks_for(int64_t n, int block = kBlock) {
  int64_t b = (n + block - 1) / block;
  if (b < 1) b = 1;
  return unsigned(b < kMaxBlocks ? b : kMaxBlocks);
}

// Runs body(i) for every i in [0, n).
template <typename Body>
__global__ void for_each_kernel(int64_t n, Body body) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

// launch_1d(stream, n, [=] __device__(int64_t i) { ... }): nothing is launched for n <= 0.
template <typename Body>
void launch_1d(cudaStream_t stream, int64_t n, Body body) {
  if (n <= 0) return;
  for_each_kernel<<<blocks_for(n), kBlock, 0, stream>>>(n, body);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

// A kernel of one's own with an explicit grid, checked like launch_1d.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), cudaStream_t stream, dim3 grid, dim3 block,
                   size_t shared_bytes, Args... args) {
  kernel<<<grid, block, shared_bytes, stream>>>(args...);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace loom::cuda
