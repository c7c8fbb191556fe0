// Softmax cross-entropy, one warp per row (rows are short: 10 classes for Fashion-MNIST). As in
// the CPU backend the exponentials and the row sum are in double and the argmax is the first
// maximal column. The per-row losses are then summed by one block in a fixed order, so the
// returned loss is deterministic.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void xent_rows(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                          float grad_scale, float* dlogits, double* row_loss, double* row_correct) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const float* z = logits + r * cols;
  // Max and first argmax: each lane scans its columns in order, then the warp keeps the larger
  // value, or the smaller column on a tie.
  float mx = z[0];
  int64_t arg = 0;
  for (int64_t c = lane; c < cols; c += 32)
    if (z[c] > mx) mx = z[c], arg = c;
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, mx, o);
    const int64_t a2 = __shfl_xor_sync(0xffffffffu, arg, o);
    if (m2 > mx || (m2 == mx && a2 < arg)) mx = m2, arg = a2;
  }
  double sum = 0;
  for (int64_t c = lane; c < cols; c += 32) sum += exp(double(z[c] - mx));
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const int32_t label = labels[r];
  const bool valid = label >= 0 && label < cols;
  if (dlogits) {
    const double inv = 1.0 / sum;
    float* dz = dlogits + r * cols;
    for (int64_t c = lane; c < cols; c += 32)
      dz[c] = float(exp(double(z[c] - mx)) * inv - double(c == label)) * grad_scale;
  }
  if (lane == 0) {
    // A label outside [0, cols) gives a NaN loss, which the caller's finiteness check reports.
    row_loss[r] =
        valid ? log(sum) - double(z[label] - mx) : __longlong_as_double(0x7ff8000000000000ll);
    row_correct[r] = double(valid && arg == label);
  }
}

constexpr int kReduceThreads = 1024;

__global__ void sum_two(const double* a, const double* b, int64_t n, double* out) {
  __shared__ double sa[kReduceThreads], sb[kReduceThreads];
  double x = 0, y = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) x += a[i], y += b[i];
  sa[threadIdx.x] = x;
  sb[threadIdx.x] = y;
  __syncthreads();
  for (int w = kReduceThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      sa[threadIdx.x] += sa[threadIdx.x + w];
      sb[threadIdx.x] += sb[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = sa[0], out[1] = sb[0];
}

}  // namespace

void softmax_xent_rows(cudaStream_t s, const float* logits, const int32_t* labels, int64_t rows,
                       int64_t cols, float grad_scale, float* dlogits, double* row_loss,
                       double* row_correct) {
  if (rows <= 0) return;
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(xent_rows, s, dim3(grid), dim3(32 * kWarpsPerBlock), 0, logits, labels, rows, cols,
                grad_scale, dlogits, row_loss, row_correct);
}

void reduce_loss(cudaStream_t s, const double* row_loss, const double* row_correct, int64_t rows,
                 double* out) {
  launch_kernel(sum_two, s, dim3(1), dim3(kReduceThreads), 0, row_loss, row_correct, rows, out);
}

}  // namespace loom::cuda
