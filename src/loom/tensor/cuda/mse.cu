// Mean squared error, one warp per row: each lane sums its columns' squared differences in
// double, the warp adds them up, and lane 0 writes the row's mean. The rows are then summed by
// reduce_loss in a fixed order, so the loss is deterministic.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void mse_kernel(const float* y, const float* target, int64_t rows, int64_t cols,
                           float grad_scale, float* dy, double* row_loss) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const float g = 2.0f / float(cols) * grad_scale;
  double sum = 0;
  for (int64_t c = lane; c < cols; c += 32) {
    const float d = y[r * cols + c] - target[r * cols + c];
    sum += double(d) * double(d);
    if (dy) dy[r * cols + c] = d * g;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) row_loss[r] = sum / double(cols);
}

}  // namespace

void mse_rows(cudaStream_t s, const float* y, const float* target, int64_t rows, int64_t cols,
              float grad_scale, float* dy, double* row_loss) {
  if (rows <= 0) return;
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(mse_kernel, s, dim3(grid), dim3(32 * kWarpsPerBlock), 0, y, target, rows, cols,
                grad_scale, dy, row_loss);
}

}  // namespace loom::cuda
