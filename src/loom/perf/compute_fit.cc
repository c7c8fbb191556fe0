#include "loom/perf/compute_fit.h"

#include <algorithm>
#include <cmath>

namespace loom::perf {

double mean_abs_error(const std::vector<FitPoint>& points, const ComputeFit& f) {
  if (points.empty()) return 0;
  double sum = 0;
  for (const auto& p : points) sum += std::abs(p.predicted(f) / p.per_gpu_published - 1);
  return sum / static_cast<double>(points.size());
}

namespace {

// The fitted parameters as integers on the fine grid: efficiencies in hundredths (5 to 100),
// the kernel time in half microseconds (0 to 80).
constexpr int kParams = 5;
struct Grid {
  int v[kParams];
};
constexpr int kLo[kParams] = {5, 5, 5, 5, 0};
constexpr int kHi[kParams] = {100, 100, 100, 100, 80};

ComputeFit at(const ComputeFit& base, const Grid& g) {
  ComputeFit f = base;
  f.cuda = g.v[0] / 100.0;
  f.cuda_shared = g.v[1] / 100.0;
  f.tensor = g.v[2] / 100.0;
  f.tensor_volta = g.v[3] / 100.0;
  f.kernel_s = g.v[4] * 0.5e-6;
  return f;
}

}  // namespace

ComputeFit fit_compute(const std::vector<FitPoint>& points, const ComputeFit& base) {
  if (points.empty()) return base;
  // Deterministic, so a refit reproduces the built-in constants exactly. First a coarse grid
  // (0.05 and 2.5 us apart) with each unit's two efficiencies tied, then, on the fine grid
  // (0.01 and 0.5 us), coordinate scans over each parameter's whole range and steps to the
  // best of the 3^5 neighbours, until neither improves. A unit no point uses keeps its value
  // from the coarse grid, so an efficiency without figures follows its unit's other one.
  Grid best{};
  double best_err = 1e300;
  auto consider = [&](const Grid& g) {
    const double err = mean_abs_error(points, at(base, g));
    if (err < best_err - 1e-12) {
      best_err = err, best = g;
      return true;
    }
    return false;
  };
  for (int c = 5; c <= 100; c += 5)
    for (int t = 5; t <= 100; t += 5)
      for (int k = 0; k <= 80; k += 5) consider(Grid{{c, c, t, t, k}});
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < kParams; ++d)
      for (int x = kLo[d]; x <= kHi[d]; ++x) {
        Grid g = best;
        g.v[d] = x;
        moved |= consider(g);
      }
    for (int n = 0; n < 243; ++n) {  // 3^5 neighbours
      Grid g = best;
      bool inside = true;
      for (int d = 0, r = n; d < kParams; ++d, r /= 3) {
        g.v[d] += r % 3 - 1;
        inside &= g.v[d] >= kLo[d] && g.v[d] <= kHi[d];
      }
      if (inside) moved |= consider(g);
    }
  }
  return at(base, best);
}

}  // namespace loom::perf
