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
                          float grad_scale, float label_smoothing, float* dlogits, double* row_loss,
                          double* row_correct) {
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
  // Label smoothing eps: target (1 - eps) onehot + eps / cols, so the loss adds
  // eps / cols * sum_c (lse - z[c]) to (1 - eps) (lse - z[label]). eps = 0 takes the one-hot
  // arithmetic unchanged, as the CPU backend does.
  const bool smooth = label_smoothing > 0.0f;
  const double eps = label_smoothing, spread = eps / double(cols);
  if (dlogits) {
    const double inv = 1.0 / sum;
    float* dz = dlogits + r * cols;
    if (!smooth) {
      for (int64_t c = lane; c < cols; c += 32)
        dz[c] = float(exp(double(z[c] - mx)) * inv - double(c == label)) * grad_scale;
    } else {
      for (int64_t c = lane; c < cols; c += 32)
        dz[c] = float(exp(double(z[c] - mx)) * inv - ((c == label ? 1.0 - eps : 0.0) + spread)) *
                grad_scale;
    }
  }
  double shifted_sum = 0;  // sum_c (z[c] - mx), for the smoothed loss
  if (smooth) {
    for (int64_t c = lane; c < cols; c += 32) shifted_sum += double(z[c] - mx);
    for (int o = 16; o > 0; o >>= 1) shifted_sum += __shfl_xor_sync(0xffffffffu, shifted_sum, o);
  }
  if (lane == 0) {
    // A label outside [0, cols) gives a NaN loss, which the caller's finiteness check reports.
    double loss = __longlong_as_double(0x7ff8000000000000ll);
    if (valid) {
      const double lse = log(sum);
      loss = smooth ? (1.0 - eps) * (lse - double(z[label] - mx)) +
                          spread * (double(cols) * lse - shifted_sum)
                    : lse - double(z[label] - mx);
    }
    row_loss[r] = loss;
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
                       int64_t cols, float grad_scale, float label_smoothing, float* dlogits,
                       double* row_loss, double* row_correct) {
  if (rows <= 0) return;
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(xent_rows, s, dim3(grid), dim3(32 * kWarpsPerBlock), 0, logits, labels, rows, cols,
                grad_scale, label_smoothing, dlogits, row_loss, row_correct);
}

void reduce_loss(cudaStream_t s, const double* row_loss, const double* row_correct, int64_t rows,
                 double* out) {
  launch_kernel(sum_two, s, dim3(1), dim3(kReduceThreads), 0, row_loss, row_correct, rows, out);
}

}  // namespace loom::cuda
