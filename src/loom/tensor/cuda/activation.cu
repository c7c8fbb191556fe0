// The elementwise activations of Backend::activation_forward/backward, with the CPU backend's
// formulas (cpu_layer_ops.cc). ReLU and LeakyReLU are selects and multiplies, exact; the
// others go through CUDA's erff/expf/tanhf (a few ulp from glibc's) and nvcc may fuse
// multiply-adds, so they agree with the CPU within the elementwise budget, not bit for bit.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

// loom::Activation's values (backend.h; cuda_backend.cc static_asserts them).
constexpr int kRelu = 0, kLeakyRelu = 1, kGelu = 2, kSilu = 3, kTanh = 4, kSigmoid = 5, kRelu6 = 6,
              kHardSigmoid = 7, kHardSwish = 8;

__device__ float hard_sigmoid(float x) {
  return fminf(fmaxf(x * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
}
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

}  // namespace

void activation_forward(cudaStream_t s, int kind, float alpha, const float* x, float* y,
                        int64_t n) {
  switch (kind) {
    case kRelu:
      relu_forward(s, x, y, n);
      return;
    case kLeakyRelu:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : alpha * v;
      });
      return;
    case kGelu:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
      });
      return;
    case kSilu:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
      });
      return;
    case kTanh:
      launch_1d(s, n, [=] __device__(int64_t i) { y[i] = tanhf(x[i]); });
      return;
    case kSigmoid:
      launch_1d(s, n, [=] __device__(int64_t i) { y[i] = 1.0f / (1.0f + expf(-x[i])); });
      return;
    case kRelu6:
      launch_1d(s, n, [=] __device__(int64_t i) { y[i] = fminf(fmaxf(x[i], 0.0f), 6.0f); });
      return;
    case kHardSigmoid:
      launch_1d(s, n, [=] __device__(int64_t i) { y[i] = hard_sigmoid(x[i]); });
      return;
    case kHardSwish:
      launch_1d(s, n, [=] __device__(int64_t i) { y[i] = x[i] * hard_sigmoid(x[i]); });
      return;
  }
}

void activation_backward(cudaStream_t s, int kind, float alpha, const float* x, const float* y,
                         const float* dy, float* dx, int64_t n) {
  switch (kind) {
    case kRelu:
      relu_backward(s, y, dy, dx, n);
      return;
    case kLeakyRelu:
      launch_1d(s, n, [=] __device__(int64_t i) { dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i]; });
      return;
    case kGelu:
      // d/dx x Phi(x) = Phi(x) + x phi(x)
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        const float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
        const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
        dx[i] = dy[i] * (cdf + v * pdf);
      });
      return;
    case kSilu:
      // d/dx x s(x) = s (1 + x (1 - s))
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        const float sg = 1.0f / (1.0f + expf(-v));
        dx[i] = dy[i] * (sg * (1.0f + v * (1.0f - sg)));
      });
      return;
    case kTanh:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float t = y[i];
        dx[i] = dy[i] * (1.0f - t * t);
      });
      return;
    case kSigmoid:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float t = y[i];
        dx[i] = dy[i] * (t * (1.0f - t));
      });
      return;
    case kRelu6:
      launch_1d(s, n,
                [=] __device__(int64_t i) { dx[i] = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f; });
      return;
    case kHardSigmoid:
      launch_1d(s, n, [=] __device__(int64_t i) {
        dx[i] = x[i] > -3.0f && x[i] < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f;
      });
      return;
    case kHardSwish:
      launch_1d(s, n, [=] __device__(int64_t i) {
        const float v = x[i];
        dx[i] = v < -3.0f ? 0.0f : v > 3.0f ? dy[i] : dy[i] * (v * (1.0f / 3.0f) + 0.5f);
      });
      return;
  }
}

}  // namespace loom::cuda
