#include "loom/data/loader/augment.h"

#include <cstring>

#include "loom/core/error.h"
#include "loom/core/rng.h"

namespace loom::data {

void augment_sample(float* x, const std::vector<int64_t>& shape, const AugmentOptions& opts,
                    uint64_t key, float* scratch) {
  if (!opts.enabled()) return;
  if (shape.size() != 2 && shape.size() != 3)
    throw ConfigError(fmt::format(
        "data.augment: crop and flip need image samples {{C, H, W}}, these have {} dimensions",
        shape.size()));
  const int64_t c = shape.size() == 3 ? shape[0] : 1;
  const int64_t h = shape[shape.size() - 2], w = shape[shape.size() - 1];
  const int64_t p = opts.crop_padding;
  Rng rng(key);
  const int64_t dy = p > 0 ? int64_t(rng.below(uint64_t(2 * p + 1))) - p : 0;
  const int64_t dx = p > 0 ? int64_t(rng.below(uint64_t(2 * p + 1))) - p : 0;
  const bool flip = opts.hflip && (rng.next_u32() & 1u);
  if (dy == 0 && dx == 0 && !flip) return;
  std::memcpy(scratch, x, size_t(c * h * w) * sizeof(float));
  for (int64_t ch = 0; ch < c; ++ch) {
    const float* src = scratch + ch * h * w;
    float* dst = x + ch * h * w;
    for (int64_t i = 0; i < h; ++i) {
      const int64_t si = i + dy;
      for (int64_t j = 0; j < w; ++j) {
        const int64_t sj = (flip ? w - 1 - j : j) + dx;
        dst[i * w + j] =
            (si >= 0 && si < h && sj >= 0 && sj < w) ? src[si * w + sj] : opts.pad_value;
      }
    }
  }
}

}  // namespace loom::data
