#include "loom/perf/compute_fit.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

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

// Descents on the fine grid start from this many of the best coarse points.
constexpr size_t kCoarseStarts = 6;

// `f` rounded to the fine grid, inside its bounds.
Grid on_grid(const ComputeFit& f) {
  const double x[kParams] = {f.cuda * 100, f.cuda_shared * 100, f.tensor * 100,
                             f.tensor_volta * 100, f.kernel_s / 0.5e-6};
  Grid g{};
  for (int d = 0; d < kParams; ++d)
    g.v[d] = std::clamp(static_cast<int>(std::lround(x[d])), kLo[d], kHi[d]);
  return g;
}

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
  // (0.05 and 2.5 us apart) with each unit's two efficiencies tied; then, on the fine grid
  // (0.01 and 0.5 us), a descent from each of the best coarse points and from `base`:
  // coordinate scans over each parameter's whole range and steps to the best of the 3^5
  // neighbours, until neither improves. The mean absolute error has several basins (a longer
  // time per kernel against higher efficiencies), so one descent from the single best coarse
  // point can stop in a worse one than `base` lies in; the best of all descents is returned. A
  // unit no point uses keeps its value from the coarse grid, so an efficiency without figures
  // follows its unit's other one.
  auto error_at = [&](const Grid& g) { return mean_abs_error(points, at(base, g)); };
  std::vector<std::pair<double, Grid>> coarse;
  for (int c = 5; c <= 100; c += 5)
    for (int t = 5; t <= 100; t += 5)
      for (int k = 0; k <= 80; k += 5) {
        const Grid g{{c, c, t, t, k}};
        coarse.emplace_back(error_at(g), g);
      }
  const size_t starts = std::min<size_t>(kCoarseStarts, coarse.size());
  std::partial_sort(coarse.begin(), coarse.begin() + starts, coarse.end(),
                    [](const auto& a, const auto& b) { return a.first < b.first; });
  coarse.resize(starts);
  coarse.emplace_back(0, on_grid(base));
  coarse.back().first = error_at(coarse.back().second);

  Grid overall{};
  double overall_err = 1e300;
  for (const auto& [start_err, start] : coarse) {
    Grid best = start;
    double best_err = start_err;
    auto consider = [&](const Grid& g) {
      const double err = error_at(g);
      if (err < best_err - 1e-12) {
        best_err = err, best = g;
        return true;
      }
      return false;
    };
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
    if (best_err < overall_err - 1e-12) overall_err = best_err, overall = best;
  }
  return at(base, overall);
}

}  // namespace loom::perf
