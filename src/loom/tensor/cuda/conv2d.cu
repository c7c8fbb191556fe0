// The own-kernel convolution's pieces (no cuDNN): im2col and col2im for a rectangular,
// strided, padded, dilated window over one image, and the batch's bias and bias gradient.
// cuda_backend.cc runs them around one cuBLAS GEMM per image and group. col2im gathers (one
// thread per image pixel, adding its columns in (ky, kx) order) instead of scattering with
// atomics, so the result is deterministic.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"
#include "loom/tensor/cuda/reduce.cuh"

namespace loom::cuda {

namespace {

// One block per channel: dbias[c] = sum over the batch and plane, in double.
__global__ void bias_grad_kernel(const float* dy, float* dbias, int64_t batch, int64_t channels,
                                 int64_t plane) {
  const int64_t c = blockIdx.x, total = batch * plane;
  double acc = 0.0;
  for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
    const int64_t n = j / plane, i = j - n * plane;
    acc += double(dy[(n * channels + c) * plane + i]);
  }
  acc = block_total(acc);
  if (threadIdx.x == 0) dbias[c] = float(acc);
}

}  // namespace

void conv_im2col(cudaStream_t s, const ConvDims& g, const float* image, float* columns) {
  const int64_t plane = g.out_h * g.out_w, kh = g.kernel_h, kw = g.kernel_w;
  const int64_t out_w = g.out_w, in_h = g.in_h, in_w = g.in_w;
  const int64_t sh = g.stride_h, sw = g.stride_w, ph = g.pad_h, pw = g.pad_w;
  const int64_t dh = g.dilation_h, dw = g.dilation_w;
  // columns[(c, ky, kx), (oy, ox)]: index i = row * plane + (oy * out_w + ox).
  launch_1d(s, g.in_c * kh * kw * plane, [=] __device__(int64_t i) {
    const int64_t row = i / plane, pos = i - row * plane;
    const int64_t oy = pos / out_w, ox = pos - oy * out_w;
    const int64_t kx = row % kw, ky = (row / kw) % kh, c = row / (kh * kw);
    const int64_t iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
    const bool inside = iy >= 0 && iy < in_h && ix >= 0 && ix < in_w;
    columns[i] = inside ? image[(c * in_h + iy) * in_w + ix] : 0.0f;
  });
}

void conv_col2im(cudaStream_t s, const ConvDims& g, const float* columns, float* image) {
  const int64_t plane = g.out_h * g.out_w, kh = g.kernel_h, kw = g.kernel_w;
  const int64_t out_h = g.out_h, out_w = g.out_w, in_h = g.in_h, in_w = g.in_w;
  const int64_t sh = g.stride_h, sw = g.stride_w, ph = g.pad_h, pw = g.pad_w;
  const int64_t dh = g.dilation_h, dw = g.dilation_w;
  launch_1d(s, g.in_c * in_h * in_w, [=] __device__(int64_t i) {
    const int64_t x = i % in_w, y = (i / in_w) % in_h, c = i / (in_w * in_h);
    float acc = 0.0f;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t ty = y + ph - ky * dh;  // = oy * stride
      if (ty < 0 || ty % sh != 0 || ty / sh >= out_h) continue;
      const int64_t oy = ty / sh;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t tx = x + pw - kx * dw;
        if (tx < 0 || tx % sw != 0 || tx / sw >= out_w) continue;
        const int64_t ox = tx / sw;
        acc += columns[((c * kh + ky) * kw + kx) * plane + oy * out_w + ox];
      }
    }
    image[i] = acc;
  });
}

void conv_add_bias(cudaStream_t s, float* y, const float* bias, int64_t batch, int64_t channels,
                   int64_t plane) {
  launch_1d(s, batch * channels * plane,
            [=] __device__(int64_t i) { y[i] += bias[(i / plane) % channels]; });
}

void conv_bias_grad(cudaStream_t s, const float* dy, float* dbias, int64_t batch, int64_t channels,
                    int64_t plane) {
  if (channels <= 0) return;
  launch_kernel(bias_grad_kernel, s, dim3(unsigned(channels)), dim3(kBlock), 0, dy, dbias, batch,
                channels, plane);
}

}  // namespace loom::cuda
