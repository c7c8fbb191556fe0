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

ComputeFit fit_compute(const std::vector<FitPoint>& points, const ComputeFit& base) {
  if (points.empty()) return base;
  // A coarse grid over the whole range, then a fine one around its best: efficiencies to 0.01
  // and the kernel time to 0.5 us, finer than the figures' own spread. Deterministic, so a
  // refit reproduces the built-in constants exactly.
  ComputeFit best = base;
  double best_err = 1e300;
  auto scan = [&](int c0, int c1, int t0, int t1, int k0, int k1, int step, int kstep) {
    ComputeFit f = base;
    for (int c = std::max(c0, 5); c <= std::min(c1, 100); c += step)
      for (int t = std::max(t0, 5); t <= std::min(t1, 100); t += step)
        for (int k = std::max(k0, 0); k <= k1; k += kstep) {
          f.cuda = c / 100.0;
          f.tensor = t / 100.0;
          f.kernel_s = k * 0.5e-6;
          const double err = mean_abs_error(points, f);
          if (err < best_err - 1e-12) best_err = err, best = f;
        }
  };
  scan(5, 100, 5, 100, 0, 80, 5, 5);  // 0.05 and 2.5 us apart
  const int c = static_cast<int>(std::lround(best.cuda * 100));
  const int t = static_cast<int>(std::lround(best.tensor * 100));
  const int k = static_cast<int>(std::lround(best.kernel_s / 0.5e-6));
  scan(c - 5, c + 5, t - 5, t + 5, k - 5, k + 5, 1, 1);
  return best;
}

}  // namespace loom::perf
