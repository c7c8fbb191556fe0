// Where a GPU's compute time per training step comes from, in order of preference:
//   published  a single-device rate of this GPU on this workload and precision
//              ([[rate]] rows of catalog.toml, each with its source): seconds per sample =
//              1 / samples_per_s at the row whose batch is closest; the rate is a whole step
//              (forward, backward, update), so nothing is added for the update;
//   chip       a published rate of another card with the same chip, scaled by the ratio of
//              peak FLOP/s at the precision (the P100 PCIe runs the SXM2's kernels at lower
//              clocks);
//   roofline   per layer, its executed FLOPs over the attainable peak of the math it runs in,
//              plus the traffic of the layers between the products over the attainable memory
//              bandwidth, plus a fixed time per kernel of the step (gpu_roofline.h).
// Rates from one publication can be set aside (`excluded_publication`): a validation case is
// never predicted from the table that publishes its figure (docs/perf.md, the protocol).
//
// Executed FLOPs: cuDNN runs stride-1 3x3 convolutions in fp32 as Winograd F(2x2, 3x3), 16
// multiplies per 2x2 output tile against 36 (Lavin & Gray, CVPR 2016: 2.25x fewer), in forward
// and in both backward passes (cuDNN 5.1's WINOGRAD_NONFUSED algorithms). So a rate may exceed
// what the nominal FLOPs at peak allow (VGG-16 on a P100: 135% of peak) without exceeding peak
// in the FLOPs actually executed. Tensor-core convolutions (TF32, FP16, BF16) run as implicit
// GEMM: factor 1.
//
// TF32 is a permission, not an order (`torch.backends.cudnn.allow_tf32` "controls where
// TensorFloat-32 tensor cores may be used in cuDNN convolutions", PyTorch's torch.backends
// docs): cuDNN chooses among its kernels, TF32 and FP32 alike, by its heuristics or, with
// benchmark mode, by timing them. In NCHW a TF32 convolution pays the transposes to NHWC
// (gpu_roofline.h) and an FP32 one does not, so where the FP32 cores are fast beside the TF32
// tensor cores (GeForce Ampere, Ada and Blackwell: TF32 at the FP32 figure) the roofline charges
// the convolutions the faster of the two plans.
#pragma once

#include <string>

#include "loom/perf/catalog.h"
#include "loom/perf/gpu_roofline.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// Multiplies executed per nominal multiply in a Winograd F(2x2, 3x3) convolution.
inline constexpr double kWinogradExecutedShare = 16.0 / 36.0;

// FLOPs a training step of one sample executes (forward + 2x forward for backward), with
// convolutions in `conv_math` (Winograd only in fp32).
double executed_train_flops(const Workload& w, const std::string& conv_math);
// Datasheet peak FLOP/s of `g` for a product in `math` (fp32, tf32, fp16, bf16, fp8); a math
// the GPU lacks runs on its FP32 cores.
double peak_flops(const GpuSpec& g, const std::string& math);

struct ComputeRate {
  // Seconds per sample of the batch-proportional part, and seconds per step that do not
  // scale with the batch (the roofline's kernels); a published rate has no fixed part.
  double sample_s = 0;
  double step_s = 0;
  bool whole_step = false;  // a published rate includes the optimizer update
  bool memory_bound = false;
  std::string method;  // published, chip, roofline
  std::string detail;  // the row and its source, or the roofline's inputs
  std::string math;    // what the products run in (MathPlan::describe)
  // Achieved executed FLOP/s over the peak of the math (published and chip rows); the fitted
  // efficiency of the roofline.
  double fraction_of_peak = 0;
};

// `precision` and `layout` as `loom scale` takes them (math_plan in gpu_roofline.h); `fit` is
// the roofline's fitted efficiencies (the built-in kComputeFit unless a validation run refits
// them). A published rate measured in the other memory format gains or loses NCHW's transposes
// (nchw_transpose_s) at the fit's memory efficiency.
ComputeRate compute_rate(const Catalog& cat, const GpuSpec& gpu, const Workload& w,
                         const std::string& precision, double batch,
                         const ComputeFit& fit = kComputeFit,
                         const std::string& excluded_publication = "",
                         const std::string& layout = "nhwc");

// "published: p100-sxm2 resnet50 fp32 at batch 64, 219 samples/s (tf-bench: ...)" etc.
std::string describe(const ComputeRate& r);

}  // namespace loom::perf
