#include "loom/perf/compute_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "loom/core/error.h"

namespace loom::perf {

double executed_train_flops(const Workload& w, const std::string& precision) {
  const bool winograd = precision != "mixed";
  double fwd = 0;
  for (const auto& l : w.layers)
    fwd += l.fwd_flops * (winograd ? 1 - l.winograd_share * (1 - kWinogradExecutedShare) : 1.0);
  return 3 * fwd;
}

double peak_flops(const GpuSpec& g, const std::string& precision) {
  const double tflops =
      precision == "mixed" && g.tensor_tflops > 0 ? g.tensor_tflops : g.fp32_tflops;
  return tflops * 1e12;
}

namespace {

// A reference workload by name; none when loom does not know it.
std::optional<Workload> known_workload(const std::string& name) {
  const auto names = reference_workload_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return std::nullopt;
  return reference_workload(name);
}

double row_fraction(const Catalog& cat, const RateSpec& r) {
  const std::optional<Workload> w = known_workload(r.workload);
  if (!w) return 0;
  return r.samples_per_s * executed_train_flops(*w, r.precision) /
         peak_flops(cat.gpu(r.gpu), r.precision);
}

}  // namespace

double roofline_efficiency(const Catalog& cat, const std::string& precision) {
  std::vector<double> f;
  for (const auto& r : cat.rates())
    if (r.precision == precision)
      if (double x = row_fraction(cat, r); x > 0) f.push_back(x);
  if (f.empty()) return 0.5;
  std::sort(f.begin(), f.end());
  const size_t n = f.size();
  return n % 2 ? f[n / 2] : 0.5 * (f[n / 2 - 1] + f[n / 2]);
}

ComputeRate compute_rate(const Catalog& cat, const GpuSpec& gpu, const Workload& w,
                         const std::string& precision, double batch) {
  if (batch <= 0) throw InputError(fmt::format("batch must be > 0, got {}", batch));
  ComputeRate out;
  // Mixed precision on a GPU without tensor cores runs at its fp32 rate, as fp32 does.
  const std::string roof = precision == "mixed" && gpu.tensor_tflops <= 0 ? "fp32" : precision;
  out.efficiency = roofline_efficiency(cat, roof);
  if (const RateSpec* r = cat.rate(gpu.name, w.name, precision, batch)) {
    out.sample_s = 1 / r->samples_per_s;
    out.method = "published";
    out.detail = fmt::format("{} {} {} at batch {:g}, {:g} samples/s ({})", r->gpu, r->workload,
                             r->precision, r->batch, r->samples_per_s, r->source);
    out.fraction_of_peak = row_fraction(cat, *r);
    return out;
  }
  if (!gpu.chip.empty()) {
    const RateSpec* best = nullptr;
    for (const auto& [name, other] : cat.gpus()) {
      if (other.chip != gpu.chip || name == gpu.name) continue;
      const RateSpec* r = cat.rate(name, w.name, precision, batch);
      if (r &&
          (!best || std::abs(std::log(r->batch / batch)) < std::abs(std::log(best->batch / batch))))
        best = r;
    }
    if (best) {
      const double scale = peak_flops(gpu, precision) / peak_flops(cat.gpu(best->gpu), precision);
      out.sample_s = 1 / (best->samples_per_s * scale);
      out.method = "chip";
      out.detail = fmt::format(
          "{} {} {} at batch {:g}, {:g} samples/s x {:.3f} (peak {} / {}, both {}) ({})", best->gpu,
          best->workload, best->precision, best->batch, best->samples_per_s, scale, gpu.name,
          best->gpu, gpu.chip, best->source);
      out.fraction_of_peak = row_fraction(cat, *best);
      return out;
    }
  }
  out.method = "roofline";
  out.detail = fmt::format(
      "{:.1f} GFLOP executed per sample at {:.0f}% of {:.1f} TFLOPS (the median of the published "
      "{} rates)",
      executed_train_flops(w, roof) / 1e9, 100 * out.efficiency, peak_flops(gpu, roof) / 1e12,
      roof);
  out.fraction_of_peak = out.efficiency;
  return out;
}

std::string describe(const ComputeRate& r) {
  return fmt::format("{}: {}", r.method, r.detail);
}

}  // namespace loom::perf
