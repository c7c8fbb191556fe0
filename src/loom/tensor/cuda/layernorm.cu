// Layer normalisation over the last axis of [rows, cols]: one block per row for the statistics
// and the input gradient (sums in double, then a fixed-order tree), one block per column for
// the gain and bias gradients (sums over rows in double). The CPU backend (cpu_seq_ops.cc) sums
// in another order, so the two agree within the reduction budget.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"
#include "loom/tensor/cuda/reduce.cuh"

namespace loom::cuda {

namespace {

constexpr int kThreads = 256;

// block_total's value in thread 0, handed to every thread of the block.
__device__ double block_broadcast_total(double v) {
  __shared__ double total;
  v = block_total(v);
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void layernorm_forward_rows(const float* x, int64_t cols, float eps, const float* gamma,
                                       const float* beta, float* y, float* mean, float* rstd) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  double s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += double(xr[c]);
  const double mu = block_broadcast_total(s) / double(cols);
  double sq = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double d = double(xr[c]) - mu;
    sq += d * d;
  }
  sq = block_broadcast_total(sq);
  const float m = float(mu);
  const float rs = float(1.0 / sqrt(sq / double(cols) + double(eps)));
  if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xr[c], m), rs), gamma[c]), beta[c]);
}

__global__ void layernorm_backward_rows(const float* x, const float* dy, int64_t cols,
                                        const float* gamma, const float* mean, const float* rstd,
                                        float* dx) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  const float* gr = dy + r * cols;
  const float m = mean[r], rs = rstd[r];
  double sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = __fmul_rn(__fsub_rn(xr[c], m), rs);
    const double g = double(gr[c]) * double(gamma[c]);
    sg += g;
    sgx += g * double(xhat);
  }
  const double mean_g = block_broadcast_total(sg) / double(cols);
  const double mean_gx = block_broadcast_total(sgx) / double(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double xhat = double(__fmul_rn(__fsub_rn(xr[c], m), rs));
    const double g = double(gr[c]) * double(gamma[c]);
    dx[r * cols + c] = float(double(rs) * (g - mean_g - xhat * mean_gx));
  }
}

__global__ void layernorm_backward_cols(const float* x, const float* dy, int64_t rows, int64_t cols,
                                        const float* mean, const float* rstd, float* dgamma,
                                        float* dbeta) {
  const int64_t c = blockIdx.x;
  double sg = 0, sb = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const float xhat = __fmul_rn(__fsub_rn(x[r * cols + c], mean[r]), rstd[r]);
    const double g = dy[r * cols + c];
    sg += g * double(xhat);
    sb += g;
  }
  sg = block_total(sg);
  sb = block_total(sb);
  if (threadIdx.x == 0) dgamma[c] = float(sg), dbeta[c] = float(sb);
}

}  // namespace

void layernorm_forward(cudaStream_t s, const float* x, int64_t rows, int64_t cols, float eps,
                       const float* gamma, const float* beta, float* y, float* mean, float* rstd) {
  if (rows <= 0) return;
  launch_kernel(layernorm_forward_rows, s, dim3(unsigned(rows)), dim3(kThreads), 0, x, cols, eps,
                gamma, beta, y, mean, rstd);
}

void layernorm_backward(cudaStream_t s, const float* x, const float* dy, int64_t rows, int64_t cols,
                        const float* gamma, const float* mean, const float* rstd, float* dx,
                        float* dgamma, float* dbeta) {
  if (cols <= 0) return;
  if (dx && rows > 0)
    launch_kernel(layernorm_backward_rows, s, dim3(unsigned(rows)), dim3(kThreads), 0, x, dy, cols,
                  gamma, mean, rstd, dx);
  launch_kernel(layernorm_backward_cols, s, dim3(unsigned(cols)), dim3(kThreads), 0, x, dy, rows,
                cols, mean, rstd, dgamma, dbeta);
}

}  // namespace loom::cuda
