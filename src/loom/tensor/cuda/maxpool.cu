// Max pooling with window = stride = size. Forward keeps the first maximal element of each
// window (row-major scan, as the CPU does); argmax is exact, so are both passes' values.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void maxpool_forward(cudaStream_t s, const float* x, float* y, int32_t* argmax, int64_t planes,
                     int64_t h, int64_t w, int64_t size) {
  const int64_t oh = h / size, ow = w / size;
  launch_1d(s, planes * oh * ow, [=] __device__(int64_t o) {
    const int64_t ox = o % ow, oy = (o / ow) % oh, p = o / (oh * ow);
    const float* in = x + p * h * w;
    int64_t best = (oy * size) * w + ox * size;
    for (int64_t dy = 0; dy < size; ++dy)
      for (int64_t dx = 0; dx < size; ++dx) {
        const int64_t idx = (oy * size + dy) * w + ox * size + dx;
        if (in[idx] > in[best]) best = idx;
      }
    y[o] = in[best];
    argmax[o] = int32_t(best);
  });
}

void maxpool_backward(cudaStream_t s, const float* dy, const int32_t* argmax, float* dx,
                      int64_t planes, int64_t h, int64_t w, int64_t size) {
  const int64_t oh = h / size, ow = w / size;
  LOOM_CUDA_CHECK(cudaMemsetAsync(dx, 0, sizeof(float) * size_t(planes * h * w), s));
  // Windows do not overlap, so each input receives at most one gradient: plain stores suffice.
  launch_1d(s, planes * oh * ow, [=] __device__(int64_t o) {
    const int64_t p = o / (oh * ow);
    dx[p * h * w + argmax[o]] += dy[o];
  });
}

}  // namespace loom::cuda
