// The ops of layers that move or scale values: the axis permutation of transpose (one thread
// per result element, its source found from the result's coordinates), and the row scaling and
// row dot products of a broadcast multiply. Row sums are in double: serial per row for short
// rows, a fixed-order block tree for long ones.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"
#include "loom/tensor/cuda/reduce.cuh"

namespace loom::cuda {

namespace {

constexpr int kThreads = 256;
// Rows at most this long are summed by one thread each.
constexpr int64_t kSerialRow = 64;

__global__ void row_dots_blocks(const float* a, const float* b, float* out, int64_t cols) {
  const int64_t r = blockIdx.x;
  double s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    s += double(a[r * cols + c]) * double(b[r * cols + c]);
  s = block_total(s);
  if (threadIdx.x == 0) out[r] = float(s);
}

}  // namespace

void permute(cudaStream_t s, const float* x, float* y, int64_t blocks, const PermutedAxes& axes) {
  int64_t block = 1;
  for (int i = 0; i < axes.rank; ++i) block *= axes.size[i];
  const PermutedAxes a = axes;
  launch_1d(s, blocks * block, [=] __device__(int64_t i) {
    const int64_t b = i / block;
    int64_t rest = i - b * block, from = b * block;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t q = rest / a.size[k];
      from += (rest - q * a.size[k]) * a.stride[k];
      rest = q;
    }
    y[i] = x[from];
  });
}

void scale_rows(cudaStream_t s, const float* x, const float* k, float* y, int64_t rows,
                int64_t cols) {
  launch_1d(s, rows * cols, [=] __device__(int64_t i) { y[i] = x[i] * k[i / cols]; });
}

void row_dots(cudaStream_t s, const float* a, const float* b, float* out, int64_t rows,
              int64_t cols) {
  if (rows <= 0) return;
  if (cols <= kSerialRow) {
    launch_1d(s, rows, [=] __device__(int64_t r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += double(a[r * cols + c]) * double(b[r * cols + c]);
      out[r] = float(sum);
    });
    return;
  }
  launch_kernel(row_dots_blocks, s, dim3(unsigned(rows)), dim3(kThreads), 0, a, b, out, cols);
}

}  // namespace loom::cuda
