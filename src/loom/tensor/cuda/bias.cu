// Bias add and its gradient, for dense rows and for per-channel planes. Reductions run in a
// fixed order (no atomics), so the same input always gives the same bits.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

// Rows summed by one thread in sum_rows' first pass: enough blocks to fill the GPU for a
// [1024, 1024] gradient, few enough partials that the second pass is short.
constexpr int64_t kRowChunk = 32;

// Pass 1: partial[chunk, c] = sum of dy[r, c] over the chunk's rows, one thread per (chunk, c);
// neighbouring threads read neighbouring columns, so loads coalesce.
__global__ void column_partials(const float* dy, float* partial, int64_t rows, int64_t cols) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  if (c >= cols) return;
  const int64_t r0 = chunk * kRowChunk;
  const int64_t r1 = r0 + kRowChunk < rows ? r0 + kRowChunk : rows;
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; ++r) acc += dy[r * cols + c];
  partial[chunk * cols + c] = acc;
}

// Block-wide sum of one value per thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// One block per channel: dbias[c] += sum of the channel's plane.
__global__ void channel_sums(const float* dy, float* dbias, int64_t plane) {
  const float* row = dy + int64_t(blockIdx.x) * plane;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) acc += row[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) dbias[blockIdx.x] += acc;
}

}  // namespace

void add_bias(cudaStream_t s, float* y, const float* bias, int64_t rows, int64_t cols) {
  launch_1d(s, rows * cols, [=] __device__(int64_t i) { y[i] += bias[i % cols]; });
}

int64_t sum_rows_workspace_floats(int64_t rows, int64_t cols) {
  return (rows + kRowChunk - 1) / kRowChunk * cols;
}

void sum_rows(cudaStream_t s, const float* dy, float* dbias, int64_t rows, int64_t cols,
              float* workspace) {
  if (cols <= 0) return;
  if (rows <= 0) {
    fill(s, dbias, cols, 0.0f);
    return;
  }
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  if (chunks > 65535) {
    // Past the grid's y limit (over 2 million rows, no layer's shape): one thread per column.
    launch_1d(s, cols, [=] __device__(int64_t c) {
      float acc = 0.0f;
      for (int64_t r = 0; r < rows; ++r) acc += dy[r * cols + c];
      dbias[c] = acc;
    });
    return;
  }
  const dim3 grid(unsigned((cols + kBlock - 1) / kBlock), unsigned(chunks));
  launch_kernel(column_partials, s, grid, dim3(kBlock), 0, dy, workspace, rows, cols);
  // Pass 2: the chunks' partials in chunk order.
  const float* partial = workspace;
  launch_1d(s, cols, [=] __device__(int64_t c) {
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
    dbias[c] = acc;
  });
}

void add_channel_bias(cudaStream_t s, float* y, const float* bias, int64_t channels,
                      int64_t plane) {
  launch_1d(s, channels * plane, [=] __device__(int64_t i) { y[i] += bias[i / plane]; });
}

void accumulate_channel_sums(cudaStream_t s, const float* dy, float* dbias, int64_t channels,
                             int64_t plane) {
  if (channels <= 0) return;
  launch_kernel(channel_sums, s, dim3(unsigned(channels)), dim3(kBlock), 0, dy, dbias, plane);
}

}  // namespace loom::cuda
