// im2col / col2im for one NCHW image. col2im gathers (one thread per image pixel, adding its
// contributions in the CPU loop's (ky, kx) order) instead of scattering with atomics, so the
// sums are deterministic and equal to the CPU backend's bit for bit.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void im2col(cudaStream_t s, const float* image, int64_t channels, int64_t height, int64_t width,
            int64_t kernel, int64_t pad, int64_t stride, float* columns) {
  const int64_t out_h = (height + 2 * pad - kernel) / stride + 1;
  const int64_t out_w = (width + 2 * pad - kernel) / stride + 1;
  const int64_t plane = out_h * out_w;
  // columns[(c, ky, kx), (oy, ox)]: index i = row * plane + (oy * out_w + ox).
  launch_1d(s, channels * kernel * kernel * plane, [=] __device__(int64_t i) {
    const int64_t row = i / plane, pos = i % plane;
    const int64_t oy = pos / out_w, ox = pos % out_w;
    const int64_t kx = row % kernel, ky = (row / kernel) % kernel, c = row / (kernel * kernel);
    const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    const bool inside = iy >= 0 && iy < height && ix >= 0 && ix < width;
    columns[i] = inside ? image[(c * height + iy) * width + ix] : 0.0f;
  });
}

void col2im(cudaStream_t s, const float* columns, int64_t channels, int64_t height, int64_t width,
            int64_t kernel, int64_t pad, int64_t stride, float* image) {
  const int64_t out_h = (height + 2 * pad - kernel) / stride + 1;
  const int64_t out_w = (width + 2 * pad - kernel) / stride + 1;
  const int64_t plane = out_h * out_w;
  launch_1d(s, channels * height * width, [=] __device__(int64_t i) {
    const int64_t x = i % width, y = (i / width) % height, c = i / (width * height);
    float acc = 0.0f;
    for (int64_t ky = 0; ky < kernel; ++ky) {
      const int64_t ty = y + pad - ky;  // = oy * stride
      if (ty < 0 || ty % stride != 0 || ty / stride >= out_h) continue;
      const int64_t oy = ty / stride;
      for (int64_t kx = 0; kx < kernel; ++kx) {
        const int64_t tx = x + pad - kx;
        if (tx < 0 || tx % stride != 0 || tx / stride >= out_w) continue;
        const int64_t ox = tx / stride;
        acc += columns[((c * kernel + ky) * kernel + kx) * plane + oy * out_w + ox];
      }
    }
    image[i] = acc;
  });
}

}  // namespace loom::cuda
