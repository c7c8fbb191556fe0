#include "loom/perf/compute_fit.h"

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
  // and the kernel time to 0.5 us, finer than the figures' own spread.
  ComputeFit best = base;
  double best_err = 1e300;
  auto scan = [&](double c0, double c1, double dc, double t0, double t1, double dt, double k0,
                  double k1, double dk) {
    ComputeFit f = base;
    for (double c = c0; c <= c1 + 1e-9; c += dc)
      for (double t = t0; t <= t1 + 1e-9; t += dt)
        for (double k = k0; k <= k1 + 1e-12; k += dk) {
          f.cuda = std::round(c * 100) / 100;
          f.tensor = std::round(t * 100) / 100;
          f.kernel_s = std::round(k * 2e6) / 2e6;
          if (f.cuda <= 0 || f.tensor <= 0 || f.cuda > 1 || f.tensor > 1 || f.kernel_s < 0)
            continue;
          const double err = mean_abs_error(points, f);
          if (err < best_err - 1e-12) best_err = err, best = f;
        }
  };
  scan(0.10, 1.00, 0.05, 0.05, 1.00, 0.05, 0, 30e-6, 2.5e-6);
  const ComputeFit c = best;
  scan(c.cuda - 0.05, c.cuda + 0.05, 0.01, c.tensor - 0.05, c.tensor + 0.05, 0.01,
       c.kernel_s - 2.5e-6, c.kernel_s + 2.5e-6, 0.5e-6);
  return best;
}

}  // namespace loom::perf
