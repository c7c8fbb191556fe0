// Fitting the GPU roofline's efficiencies (gpu_roofline.h ComputeFit) to published throughput.
// Each figure becomes a point whose predicted step is, but for the weights, linear in the fit's
// reciprocals:
//   step = samples x (cuda_s / cuda + cuda_shared_s / cuda_shared + tensor_s / tensor
//                     + tensor_volta_s / tensor_volta + memory_s / memory
//                     + the sum over products of max(0, weight passes / memory - math / eff))
//          + kernels x kernel_s + rest
// where `rest` (exposed communication, the update, input) is taken from the full cost model at
// the built-in fit and held fixed. The fit minimises the mean |error| of samples/s over a grid.
#pragma once

#include <string>
#include <vector>

#include "loom/perf/gpu_roofline.h"

namespace loom::perf {

struct FitPoint {
  std::string name, publication;
  RooflineParts parts;           // per sample and per micro-step, at efficiency 1
  double samples = 0;            // samples per step and GPU (micro-batch x accumulation)
  double micro_steps = 1;        // kernels run once per micro-step
  double rest_s = 0;             // the step's other terms
  double per_gpu_published = 0;  // published samples/s per GPU
  double predicted(const ComputeFit& f) const {
    const double step =
        samples * parts.sample_s(f) + micro_steps * parts.kernels * f.kernel_s + rest_s;
    return samples / step;
  }
};

// The best fit the grid's descents find, never worse than `base` (one descent starts there);
// `memory` is held at `base.memory` (docs/perf.md says why).
ComputeFit fit_compute(const std::vector<FitPoint>& points, const ComputeFit& base = kComputeFit);

double mean_abs_error(const std::vector<FitPoint>& points, const ComputeFit& f);

}  // namespace loom::perf
