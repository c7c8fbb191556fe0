// The median of repeated timings, the figure every probe in measure/ reports: robust to the
// odd repetition slowed by another process.
#pragma once

#include <algorithm>
#include <vector>

namespace loom::measure {

// The upper median of `v` (the middle element after sorting); `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace loom::measure
