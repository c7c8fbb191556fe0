// Where a GPU's compute time per training step comes from, in order of preference:
//   published  a single-device rate of this GPU on this workload and precision
//              ([[rate]] rows of catalog.toml, each with its source): seconds per sample =
//              1 / samples_per_s at the row whose batch is closest; the rate is a whole step
//              (forward, backward, update), so nothing is added for the update;
//   chip       a published rate of another card with the same chip, scaled by the ratio of
//              peak FLOP/s at the precision (the P100 PCIe runs the SXM2's kernels at lower
//              clocks);
//   roofline   max(executed FLOPs / (peak x efficiency), bytes / (memory bandwidth x 0.8)),
//              where the efficiency is the median over the published rates of their
//              achieved executed FLOP/s / peak at that precision (a fitted parameter whose
//              training subset is the [[rate]] table, not the validation set).
// Executed FLOPs: cuDNN runs stride-1 3x3 convolutions as Winograd F(2x2, 3x3), 16 multiplies
// per 2x2 output tile against 36 (Lavin & Gray, CVPR 2016: 2.25x fewer), in forward and in
// both backward passes (cuDNN 5.1's WINOGRAD_NONFUSED algorithms). So a rate may exceed what
// the nominal FLOPs at peak allow (VGG-16 on a P100: 135% of peak) without exceeding peak in
// the FLOPs actually executed. Tensor-core (mixed) convolutions run as implicit GEMM: factor 1.
#pragma once

#include <string>

#include "loom/perf/catalog.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// Multiplies executed per nominal multiply in a Winograd F(2x2, 3x3) convolution.
inline constexpr double kWinogradExecutedShare = 16.0 / 36.0;

// FLOPs a training step of one sample executes (forward + 2x forward for backward).
double executed_train_flops(const Workload& w, const std::string& precision);
// Peak FLOP/s of `g` at `precision` (mixed: the FP16 tensor rate when it has one).
double peak_flops(const GpuSpec& g, const std::string& precision);

struct ComputeRate {
  double sample_s = 0;    // seconds per sample, whole step; 0 with the roofline
  double efficiency = 0;  // the roofline's fraction of peak (also set for published rates)
  std::string method;     // published, chip, roofline
  std::string detail;     // the row and its source, or the roofline's inputs
  // The rate row's achieved executed FLOP/s over peak (published and chip); the roofline's
  // efficiency otherwise. Never above 1 for a sound row.
  double fraction_of_peak = 0;
};

// The roofline efficiency at `precision`: the median over `cat`'s rates of executed FLOP/s /
// peak (rates of workloads loom does not know are skipped). 0.5 when there is none.
double roofline_efficiency(const Catalog& cat, const std::string& precision);

ComputeRate compute_rate(const Catalog& cat, const GpuSpec& gpu, const Workload& w,
                         const std::string& precision, double batch);

// "published: p100-sxm2 resnet50 fp32 at batch 64, 219 samples/s (tf-bench: ...)" etc.
std::string describe(const ComputeRate& r);

}  // namespace loom::perf
