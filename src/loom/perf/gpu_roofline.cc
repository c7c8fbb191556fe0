#include "loom/perf/gpu_roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"

namespace loom::perf {

namespace {

bool tensor_math(const std::string& math) {
  return math != "fp32";
}

// How many times its FLOPs a tensor-core convolution reading `channels` input channels executes:
// they are padded to a multiple of 8 in 16-bit math, of 4 in TF32 (gpu_roofline.h).
double channel_padding(const std::string& math, double channels) {
  const double multiple = math == "tf32" ? 4 : 8;
  return std::ceil(channels / multiple) * multiple / channels;
}

// The math a GPU really runs when `math` is asked of it: without the tensor mode, its FP32 cores.
std::string available(const GpuSpec& g, const std::string& math) {
  if (math == "tf32") return g.tf32_tflops > 0 ? "tf32" : "fp32";
  if (math == "fp8") return g.fp8_tflops > 0 ? "fp8" : available(g, "bf16");
  if (math == "bf16") return g.tensor_tflops > 0 && g.cuda_cc >= 8.0 ? "bf16" : "fp32";
  if (math == "fp16") return g.tensor_tflops > 0 ? "fp16" : "fp32";
  return "fp32";
}

}  // namespace

bool is_precision(const std::string& p) {
  return p == "fp32" || p == "tf32" || p == "default" || p == "bf16" || p == "fp16" ||
         p == "mixed" || p == "fp8";
}

bool is_low_precision(const std::string& p) {
  return p == "bf16" || p == "fp16" || p == "mixed" || p == "fp8";
}

bool is_layout(const std::string& layout) {
  return layout == "nhwc" || layout == "nchw";
}

MathPlan math_plan(const GpuSpec& g, const std::string& precision, const std::string& layout) {
  if (!is_precision(precision))
    throw InputError(
        fmt::format("unknown precision '{}'; expected {}", precision, kPrecisionNames));
  if (!is_layout(layout))
    throw InputError(fmt::format("unknown layout '{}'; expected {}", layout, kLayoutNames));
  MathPlan m;
  m.requested = precision;
  m.layout = layout;
  std::string conv = precision, gemm = precision;
  if (precision == "default") conv = "tf32", gemm = "fp32";
  if (precision == "mixed") conv = gemm = g.cuda_cc >= 8.0 ? "bf16" : "fp16";
  if (precision == "fp8") conv = "bf16";
  m.conv = available(g, conv);
  m.gemm = available(g, gemm);
  m.act_bytes = is_low_precision(precision) ? 2 : 4;
  return m;
}

std::string MathPlan::rate_class() const {
  if (gemm == "fp8") return "fp8";
  if (conv == "fp16" || conv == "bf16" || gemm == "fp16" || gemm == "bf16") return "mixed";
  if (conv == "tf32" || gemm == "tf32") return "tf32";
  return "fp32";
}

bool MathPlan::transposes() const {
  // Every convolution on the tensor cores (gpu_roofline.h); `conv` is never fp8.
  return layout == "nchw" && tensor_math(conv);
}

std::string MathPlan::describe() const {
  const std::string nchw = transposes() ? ", NCHW (transposed for the tensor cores)" : "";
  if (conv == gemm) return fmt::format("products {}{}", conv, nchw);
  return fmt::format("convolutions {}, matrix products {}{}", conv, gemm, nchw);
}

std::string describe(const ComputeFit& f) {
  return fmt::format(
      "FP32 cores {:.0f}% ({:.0f}% before Volta), tensor cores {:.0f}% ({:.0f}% on Volta), memory "
      "{:.0f}%, {:.1f} us a kernel",
      100 * f.cuda, 100 * f.cuda_shared, 100 * f.tensor, 100 * f.tensor_volta, 100 * f.memory,
      1e6 * f.kernel_s);
}

double l2_held_share(const GpuSpec& g, const Workload& w, double act_bytes, double batch) {
  if (g.l2_mib <= 0 || batch <= 0 || w.elementwise_bytes <= 0) return 0;
  const double l2_bytes = g.l2_mib * 1024 * 1024;
  double held = 0;
  for (const TensorTraffic& t : w.elementwise_by_tensor)
    if (kL2HeldTensors * batch * t.values * act_bytes <= l2_bytes) held += t.bytes;
  return std::min(1.0, held / w.elementwise_bytes);
}

double RooflineParts::weights_s(const ComputeFit& f) const {
  double s = 0;
  for (const WeightPasses& l : weights) {
    const double eff = l.unit == MathUnit::kCuda         ? f.cuda
                       : l.unit == MathUnit::kCudaShared ? f.cuda_shared
                       : l.unit == MathUnit::kTensor     ? f.tensor
                                                         : f.tensor_volta;
    s += std::max(0.0, l.passes_s / f.memory - l.math_s / eff);
  }
  return s;
}

RooflineParts roofline_parts(const GpuSpec& g, const Workload& w, const MathPlan& m, double batch) {
  RooflineParts p;
  const double bandwidth = g.mem_bw_gbs * 1e9;
  for (const auto& l : w.layers) {
    const bool conv = l.kind == ProductKind::kConv;
    const std::string& math = conv ? m.conv : m.gemm;
    // The attainable peak: the datasheet figure times what a large GEMM measures of it; for
    // a convolution in fp32 where the other FP32 datapath is shared with INT32 (its index
    // arithmetic keeps it busy), one datapath: half the figure.
    double peak =
        peak_flops(g, math) * (tensor_math(math) ? g.tensor_gemm_fraction : g.fp32_gemm_fraction);
    if (conv && math == "fp32" && g.fp32_dual_issue) peak = peak_flops(g, math) / 2;
    double flops = 3 * l.fwd_flops;
    if (conv && math == "fp32") flops *= 1 - l.winograd_share * (1 - kWinogradExecutedShare);
    if (conv && tensor_math(math))
      flops *= 1 + l.image_input_share * (channel_padding(math, l.image_channels) - 1);
    const MathUnit unit =
        tensor_math(math)
            ? (g.first_tensor_generation() ? MathUnit::kTensorVolta : MathUnit::kTensor)
            : (g.fp32_shares_int32() ? MathUnit::kCudaShared : MathUnit::kCuda);
    double& part = unit == MathUnit::kTensorVolta  ? p.tensor_volta_s
                   : unit == MathUnit::kTensor     ? p.tensor_s
                   : unit == MathUnit::kCudaShared ? p.cuda_shared_s
                                                   : p.cuda_s;
    part += flops / peak;
    // The layer's passes over its weights, per sample of the step (weights, gpu_roofline.h).
    if (batch > 0 && l.params > 0 && l.fwd_flops > 0)
      p.weights.push_back(
          {unit, flops / peak, kWeightPasses * l.params * m.act_bytes / batch / bandwidth});
  }
  const double kept = std::min(w.fp32_elementwise_bytes, w.elementwise_bytes);
  p.l2_share = l2_held_share(g, w, m.act_bytes, batch);
  p.memory_s = ((w.elementwise_bytes - kept) * (m.act_bytes / 4) + kept) *
               (1 - kL2ServedShare * p.l2_share) / bandwidth;
  p.kernels = w.kernels;
  if (m.transposes()) {
    p.transpose_s = nchw_transpose_s(g, w, m.act_bytes);
    p.memory_s += p.transpose_s;
  }
  return p;
}

double nchw_transpose_s(const GpuSpec& g, const Workload& w, double act_bytes) {
  // Three passes over each convolution's input and output values (gpu_roofline.h), each read
  // and written once.
  constexpr double kPasses = 3;
  return kPasses * 2 * act_bytes * w.conv_io_values / (g.mem_bw_gbs * 1e9);
}

}  // namespace loom::perf
