// Inverted dropout with a counter-based mask: element i is kept iff
// philox_uniform(key, first_index + i) >= p, tested as the CPU backend does on the draw's top 24
// bits (u >= ceil(p 2^24), exact), so masks are bit-identical. Values are x * (keep * scale),
// also as the CPU writes them: a dropped negative x gives -0.0, a dropped Inf gives NaN.
// One thread per Philox block (4 consecutive draws), which covers the 1-3 elements of a partial
// block at either end of the range.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"
#include "loom/tensor/cuda/philox.cuh"

namespace loom::cuda {

void dropout_forward(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n,
                     uint32_t threshold, float keep_scale, uint64_t key, uint64_t first_index) {
  if (n <= 0) return;
  const uint64_t first_block = first_index >> 2;
  const uint64_t last_block = (first_index + uint64_t(n) - 1) >> 2;
  const int64_t blocks = int64_t(last_block - first_block + 1);
  const uint64_t end = first_index + uint64_t(n);
  launch_1d(s, blocks, [=] __device__(int64_t b) {
    const uint64_t block = first_block + uint64_t(b);
    const Philox4 r = philox4x32(uint32_t(block), uint32_t(block >> 32), 0, 0, key);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint64_t j = block * 4 + uint64_t(w);  // global draw index
      if (j < first_index || j >= end) continue;
      const uint64_t i = j - first_index;
      const bool keep = (r.w[w] >> 8) >= threshold;
      mask[i] = uint8_t(keep);
      y[i] = x[i] * (float(keep) * keep_scale);
    }
  });
}

void dropout_backward(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n,
                      float keep_scale) {
  launch_1d(s, n, [=] __device__(int64_t i) { dx[i] = dy[i] * (float(mask[i]) * keep_scale); });
}

}  // namespace loom::cuda
