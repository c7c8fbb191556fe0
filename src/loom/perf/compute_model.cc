#include "loom/perf/compute_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "loom/core/error.h"

namespace loom::perf {

double executed_train_flops(const Workload& w, const std::string& conv_math) {
  const bool winograd = conv_math == "fp32";
  double fwd = 0;
  for (const auto& l : w.layers) {
    const bool wino = winograd && l.kind == ProductKind::kConv;
    fwd += l.fwd_flops * (wino ? 1 - l.winograd_share * (1 - kWinogradExecutedShare) : 1.0);
  }
  return 3 * fwd;
}

double peak_flops(const GpuSpec& g, const std::string& math) {
  double tflops = g.fp32_tflops;
  if (math == "tf32" && g.tf32_tflops > 0) tflops = g.tf32_tflops;
  if ((math == "fp16" || math == "bf16") && g.tensor_tflops > 0) tflops = g.tensor_tflops;
  if (math == "fp8" && g.fp8_tflops > 0) tflops = g.fp8_tflops;
  return tflops * 1e12;
}

namespace {

// A reference workload by name; none when loom does not know it.
std::optional<Workload> known_workload(const std::string& name) {
  const auto names = reference_workload_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return std::nullopt;
  return reference_workload(name);
}

// A rate row's achieved executed FLOP/s over the peak of its math (0 for an unknown workload).
double row_fraction(const Catalog& cat, const RateSpec& r) {
  const std::optional<Workload> w = known_workload(r.workload);
  if (!w) return 0;
  const GpuSpec& g = cat.gpu(r.gpu);
  const MathPlan m = math_plan(g, r.precision);  // a row's precision class is a precision
  return r.samples_per_s * executed_train_flops(*w, m.conv) / peak_flops(g, m.gemm);
}

const RateSpec* closest_rate(const Catalog& cat, const std::string& gpu, const Workload& w,
                             const std::string& rate_class, double batch,
                             const std::string& excluded) {
  const RateSpec* best = nullptr;
  for (const auto& r : cat.rates()) {
    if (r.gpu != gpu || r.workload != w.name || r.precision != rate_class) continue;
    if (!excluded.empty() && r.publication == excluded) continue;
    if (!best || std::abs(std::log(r.batch / batch)) < std::abs(std::log(best->batch / batch)))
      best = &r;
  }
  return best;
}

// The share of a sample's FLOPs in convolutions.
double conv_share(const Workload& w) {
  double conv = 0;
  for (const auto& l : w.layers)
    if (l.kind == ProductKind::kConv) conv += l.fwd_flops;
  return w.fwd_flops() > 0 ? conv / w.fwd_flops() : 0;
}

// Seconds per sample a row's rate gains when a run's memory format costs transposes the row's
// run did not pay (negative: the row paid them and the run does not); 0 where neither or both.
double layout_adjustment_s(const GpuSpec& gpu, const Workload& w, const MathPlan& run,
                           const RateSpec& row, const ComputeFit& fit) {
  MathPlan measured = run;
  measured.layout = row.layout;
  if (run.transposes() == measured.transposes()) return 0;
  const double s = nchw_transpose_s(gpu, w, run.act_bytes) / fit.memory;
  return run.transposes() ? s : -s;
}

// Applies layout_adjustment_s to a published row's seconds per sample, and says so.
void adjust_for_layout(ComputeRate& out, const GpuSpec& gpu, const Workload& w,
                       const MathPlan& plan, const RateSpec& row, const ComputeFit& fit) {
  const double d = layout_adjustment_s(gpu, w, plan, row, fit);
  if (d == 0) return;
  if (out.sample_s + d <= 0) {
    out.detail +=
        fmt::format("; the row's {} transposes exceed its rate, left unadjusted", row.layout);
    return;
  }
  out.sample_s += d;
  out.detail += fmt::format("; {} {:.3f} ms a sample for NCHW's transposes (the row: {})",
                            d > 0 ? "+" : "-", 1e3 * std::abs(d), row.layout);
}

}  // namespace

ComputeRate compute_rate(const Catalog& cat, const GpuSpec& gpu, const Workload& w,
                         const std::string& precision, double batch, const ComputeFit& fit,
                         const std::string& excluded_publication, const std::string& layout) {
  if (batch <= 0) throw InputError(fmt::format("batch must be > 0, got {}", batch));
  const MathPlan plan = math_plan(gpu, precision, layout);
  ComputeRate out;
  out.math = plan.describe();
  const std::string cls = plan.rate_class();
  if (const RateSpec* r = closest_rate(cat, gpu.name, w, cls, batch, excluded_publication)) {
    out.sample_s = 1 / r->samples_per_s;
    out.whole_step = true;
    out.method = "published";
    out.detail = fmt::format("{} {} {} at batch {:g}, {:g} samples/s ({})", r->gpu, r->workload,
                             r->precision, r->batch, r->samples_per_s, r->source);
    out.fraction_of_peak = row_fraction(cat, *r);
    adjust_for_layout(out, gpu, w, plan, *r, fit);
    return out;
  }
  if (!gpu.chip.empty()) {
    const RateSpec* best = nullptr;
    for (const auto& [name, other] : cat.gpus()) {
      if (other.chip != gpu.chip || name == gpu.name) continue;
      const RateSpec* r = closest_rate(cat, name, w, cls, batch, excluded_publication);
      if (r &&
          (!best || std::abs(std::log(r->batch / batch)) < std::abs(std::log(best->batch / batch))))
        best = r;
    }
    if (best) {
      const std::string& math = conv_share(w) > 0.5 ? plan.conv : plan.gemm;
      const double scale = peak_flops(gpu, math) / peak_flops(cat.gpu(best->gpu), math);
      out.sample_s = 1 / (best->samples_per_s * scale);
      out.whole_step = true;
      out.method = "chip";
      out.detail = fmt::format(
          "{} {} {} at batch {:g}, {:g} samples/s x {:.3f} (peak {} / {}, both {}) ({})", best->gpu,
          best->workload, best->precision, best->batch, best->samples_per_s, scale, gpu.name,
          best->gpu, gpu.chip, best->source);
      out.fraction_of_peak = row_fraction(cat, *best);
      adjust_for_layout(out, gpu, w, plan, *best, fit);
      return out;
    }
  }
  MathPlan used = plan;
  RooflineParts p = roofline_parts(gpu, w, plan, batch);
  if (plan.conv == "tf32" && plan.transposes()) {
    // TF32 is allowed, not forced: cuDNN picks the faster of its TF32 kernels, with NCHW's
    // transposes, and its FP32 ones, without them (compute_model.h).
    MathPlan fp32 = plan;
    fp32.conv = "fp32";
    const RooflineParts q = roofline_parts(gpu, w, fp32, batch);
    if (q.step_s(fit, batch) < p.step_s(fit, batch)) {
      used = fp32;
      p = q;
    }
  }
  out.math = used.describe();
  if (used.conv != plan.conv)
    out.math += " (TF32 allowed; in NCHW its transposes make the FP32 kernels faster here)";
  out.method = "roofline";
  out.sample_s = p.sample_s(fit);
  out.step_s = p.kernels * fit.kernel_s;
  out.memory_bound = p.memory_bound(fit);
  // The attained share of peak over the products, weighted by their time.
  const double at_peak = p.at_peak_s();
  out.fraction_of_peak = at_peak > 0 ? at_peak / p.products_s(fit) : 0;
  const std::string transposes =
      p.transpose_s > 0
          ? fmt::format(" ({:.2f} ms of them NCHW's transposes)", 1e3 * p.transpose_s / fit.memory)
          : "";
  // Said where it reaches a whole percent: a share that rounds to 0 moves nothing visible.
  const std::string held =
      p.l2_share >= 0.005
          ? fmt::format(" ({:.0f}% of their traffic on tensors the {:g} MiB L2 holds)",
                        100 * p.l2_share, gpu.l2_mib)
          : "";
  // Said where it reaches a hundredth of a millisecond, as the other parts are.
  const double waited_s = p.weights_s(fit);
  const std::string weights =
      waited_s >= 0.005e-3
          ? fmt::format(" + {:.2f} ms the products wait on their weights", 1e3 * waited_s)
          : "";
  out.detail = fmt::format(
      "{}; per sample {:.2f} ms in the products at {:.0f}% of their peaks + {:.2f} ms between "
      "them{}{} at {:.0f}% of {:g} GB/s{}; {:g} kernels a step at {:.1f} us",
      out.math, 1e3 * p.products_s(fit), 100 * out.fraction_of_peak, 1e3 * p.memory_s / fit.memory,
      transposes, held, 100 * fit.memory, gpu.mem_bw_gbs, weights, p.kernels, 1e6 * fit.kernel_s);
  return out;
}

std::string describe(const ComputeRate& r) {
  return fmt::format("{}: {}", r.method, r.detail);
}

}  // namespace loom::perf
