#include "loom/train/tensorboard_histogram.h"

#include <algorithm>
#include <cmath>

namespace loom::train::tensorboard {

Histogram histogram_of(std::span<const float> values, int buckets) {
  Histogram h;
  double lo = INFINITY, hi = -INFINITY;
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    const double v = f;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.num == 0) return h;
  h.min = lo;
  h.max = hi;
  const int n = hi > lo ? std::max(buckets, 1) : 1;
  const double width = (hi - lo) / n;
  h.bucket_limit.resize(size_t(n));
  for (int i = 0; i < n; ++i) h.bucket_limit[size_t(i)] = lo + width * (i + 1);
  h.bucket_limit.back() = hi;  // exactly, whatever the rounding of the widths
  h.bucket.assign(size_t(n), 0.0);
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    // Bucket i holds (limit[i-1], limit[i]]: the index from the width, then corrected by the
    // limits themselves, so rounding never puts a value beyond its bucket's edge.
    const double v = f;
    int i = width > 0 ? int(std::ceil((v - lo) / width)) - 1 : 0;
    i = std::clamp(i, 0, n - 1);
    while (i > 0 && v <= h.bucket_limit[size_t(i - 1)]) --i;
    while (i < n - 1 && v > h.bucket_limit[size_t(i)]) ++i;
    h.bucket[size_t(i)] += 1;
  }
  return h;
}

}  // namespace loom::train::tensorboard
