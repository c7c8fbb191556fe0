// The causal softmax of attention scores, one warp per row of each [t, t] block: row i is the
// softmax of its entries 0..i (exponentials and sum in double, as the CPU backend computes
// them), the rest are zero. Backward: dx = y (dy - sum_j y dy) over the same entries. The plain
// softmax of rows of t entries is the same kernel with every entry visible.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void causal_softmax_rows(const float* x, float* y, int64_t rows, int64_t t,
                                    bool causal) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int64_t i = causal ? r % t : t - 1;
  const float* xr = x + r * t;
  float* yr = y + r * t;
  float mx = xr[0];
  for (int64_t j = lane; j <= i; j += 32) mx = fmaxf(mx, xr[j]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = 0;
  for (int64_t j = lane; j <= i; j += 32) sum += exp(double(xr[j] - mx));
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const double inv = 1.0 / sum;
  // Reads of row i finish (the sums above) before any lane writes: x and y may be one buffer.
  __syncwarp();
  for (int64_t j = lane; j < t; j += 32)
    yr[j] = j <= i ? float(exp(double(xr[j] - mx)) * inv) : 0.0f;
}

__global__ void causal_softmax_backward_rows(const float* y, const float* dy, float* dx,
                                             int64_t rows, int64_t t, bool causal) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int64_t i = causal ? r % t : t - 1;
  const float* yr = y + r * t;
  const float* gr = dy + r * t;
  float* dr = dx + r * t;
  double dot = 0;
  for (int64_t j = lane; j <= i; j += 32) dot += double(yr[j]) * double(gr[j]);
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  __syncwarp();
  for (int64_t j = lane; j < t; j += 32)
    dr[j] = j <= i ? float(double(yr[j]) * (double(gr[j]) - dot)) : 0.0f;
}

}  // namespace

void softmax_rows(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t t, bool causal) {
  if (rows <= 0) return;
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(causal_softmax_rows, s, dim3(grid), dim3(32 * kWarpsPerBlock), 0, x, y, rows, t,
                causal);
}

void softmax_rows_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t rows,
                           int64_t t, bool causal) {
  if (rows <= 0) return;
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(causal_softmax_backward_rows, s, dim3(grid), dim3(32 * kWarpsPerBlock), 0, y, dy,
                dx, rows, t, causal);
}

}  // namespace loom::cuda
