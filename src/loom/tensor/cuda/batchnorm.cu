// Batch normalisation over [batch, channels, plane]: the per-channel sums (one block per
// channel, each thread summing in double, then a fixed-order tree, so deterministic; the CPU
// sums in another order, so they agree within the reduction budget) and the elementwise
// passes, with the CPU backend's coefficients (cpu_layer_ops.cc).
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"
#include "loom/tensor/cuda/reduce.cuh"

namespace loom::cuda {

namespace {

// sum[c] = sum (x - shift[c]), sumsq[c] = sum (x - shift[c])^2; either may be null.
__global__ void moments_kernel(const float* x, int64_t batch, int64_t channels, int64_t plane,
                               const float* shift, float* sum, float* sumsq) {
  const int64_t c = blockIdx.x, total = batch * plane;
  const float k = shift ? shift[c] : 0.0f;
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
    const int64_t n = j / plane, i = j - n * plane;
    const double d = double(x[(n * channels + c) * plane + i]) - double(k);
    s1 += d;
    s2 += d * d;
  }
  s1 = block_total(s1);
  s2 = block_total(s2);
  if (threadIdx.x == 0) {
    if (sum) sum[c] = float(s1);
    if (sumsq) sumsq[c] = float(s2);
  }
}

// sum_dy[c] = sum dy, sum_dy_xhat[c] = sum dy (x - mean[c]) / sqrt(var[c] + eps).
__global__ void grad_sums_kernel(const float* x, const float* dy, int64_t batch, int64_t channels,
                                 int64_t plane, const float* mean, const float* var, float eps,
                                 float* sum_dy, float* sum_dy_xhat) {
  const int64_t c = blockIdx.x, total = batch * plane;
  const double m = mean[c];
  double s_dy = 0.0, s_dy_xmu = 0.0;
  for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
    const int64_t n = j / plane, i = j - n * plane;
    const int64_t at = (n * channels + c) * plane + i;
    const double g = dy[at];
    s_dy += g;
    s_dy_xmu += g * (double(x[at]) - m);
  }
  s_dy = block_total(s_dy);
  s_dy_xmu = block_total(s_dy_xmu);
  if (threadIdx.x == 0) {
    sum_dy[c] = float(s_dy);
    sum_dy_xhat[c] = float(s_dy_xmu / sqrt(double(var[c]) + double(eps)));
  }
}

}  // namespace

void channel_moments(cudaStream_t s, const float* x, int64_t batch, int64_t channels, int64_t plane,
                     const float* shift, float* sum, float* sumsq) {
  if (channels <= 0 || (!sum && !sumsq)) return;
  launch_kernel(moments_kernel, s, dim3(unsigned(channels)), dim3(kBlock), 0, x, batch, channels,
                plane, shift, sum, sumsq);
}

void batchnorm_forward(cudaStream_t s, const float* x, int64_t batch, int64_t channels,
                       int64_t plane, const float* mean, const float* var, float eps,
                       const float* gamma, const float* beta, float* y) {
  // y = x a + b with a = gamma istd, b = beta - mean a, as the CPU computes them.
  launch_1d(s, batch * channels * plane, [=] __device__(int64_t i) {
    const int64_t c = (i / plane) % channels;
    const float a = gamma[c] / sqrtf(var[c] + eps);
    const float b = beta[c] - mean[c] * a;
    y[i] = x[i] * a + b;
  });
}

void batchnorm_backward_reduce(cudaStream_t s, const float* x, const float* dy, int64_t batch,
                               int64_t channels, int64_t plane, const float* mean, const float* var,
                               float eps, float* sum_dy, float* sum_dy_xhat) {
  if (channels <= 0) return;
  launch_kernel(grad_sums_kernel, s, dim3(unsigned(channels)), dim3(kBlock), 0, x, dy, batch,
                channels, plane, mean, var, eps, sum_dy, sum_dy_xhat);
}

void batchnorm_backward_data(cudaStream_t s, const float* x, const float* dy, int64_t batch,
                             int64_t channels, int64_t plane, const float* mean, const float* var,
                             float eps, const float* gamma, const float* sum_dy,
                             const float* sum_dy_xhat, double count, float* dx) {
  // dx = a (dy - b - (x - mean) k), the coefficients in double as the CPU computes them.
  launch_1d(s, batch * channels * plane, [=] __device__(int64_t i) {
    const int64_t c = (i / plane) % channels;
    const double istd = 1.0 / sqrt(double(var[c]) + double(eps));
    const float a = float(double(gamma[c]) * istd);
    const float b = sum_dy ? float(double(sum_dy[c]) / count) : 0.0f;
    const float k = sum_dy_xhat ? float(double(sum_dy_xhat[c]) * istd / count) : 0.0f;
    dx[i] = a * (dy[i] - b - (x[i] - mean[c]) * k);
  });
}

}  // namespace loom::cuda
