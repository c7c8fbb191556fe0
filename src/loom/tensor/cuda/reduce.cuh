// Block-wide sums for the per-channel reductions (conv bias gradient, batch norm): a warp
// shuffle tree, then the warps' partials through shared memory. A fixed order, so the same
// input always gives the same bits.
#pragma once

#include <cuda_runtime.h>

namespace loom::cuda {

// The sum of v over the block, valid in thread 0 (blockDim.x a multiple of 32, at most 1024).
// Every thread of the block must call it; it may be called several times in a row.
template <typename T>
__device__ T block_total(T v) {
  __shared__ T warp_sums[32];
  __syncthreads();  // a previous call's readers are done with warp_sums
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : T(0);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace loom::cuda
