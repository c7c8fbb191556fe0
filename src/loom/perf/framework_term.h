// The framework term: how far the training software a figure was published with sits from the
// model. The model predicts one step for a GPU, a workload and a precision; published runs of
// the same GPU differ by their software (fused kernels, per-operation overhead, memory format,
// what its mixed precision keeps in fp32): on eight A100s, plain PyTorch AMP trains ResNet-50
// about 20% slower than the model and tuned LLM stacks train 15-25% faster (docs/perf.md).
//
// The term is a band, not one number: each software of the validation set
// (data/hardware/validation.toml `software`) has an offset, the mean of its throughput cases'
// leave-one-source-out errors, and a prediction is given with the range of published rates
// those offsets imply. The offsets are not applied to the prediction: applied to a case from
// the software's other publications only, they do not make it better (framework_term() says by
// how much, `loom scale --anchors` prints it), so the software a user runs moves the figure
// within the band rather than by a known amount.
#pragma once

#include <string>
#include <vector>

#include "loom/perf/validation_set.h"

namespace loom::perf {

// One software's throughput cases. offset = mean of (predicted - published) / published, left
// out by source: positive when the model is faster than what the software published.
struct SoftwareOffset {
  std::string software;
  int cases = 0, publications = 0;
  double offset = 0;
  double rms = 0;  // root mean square of its cases' errors around zero
};

struct FrameworkTerm {
  std::vector<SoftwareOffset> softwares;  // every named software with throughput cases
  // The softwares with at least kFrameworkMinCases cases whose offsets lie lowest and highest: a
  // published rate lies near predicted / (1 + offset), so `low` marks the fastest software
  // and `high` the slowest.
  SoftwareOffset low, high;
  double spread = 0;  // root mean square of those softwares' offsets
  // Whether the offsets predict: over the throughput cases whose software has another
  // publication, the mean |error| left out by source, as is and divided by (1 + the offset of
  // the software's other publications).
  int transferable = 0;
  double mean_abs_as_is = 0, mean_abs_with_offset = 0;
  bool valid() const { return !low.software.empty(); }
  // Samples/s a software at the band's ends would publish for a prediction of `samples_per_s`.
  double fastest(double samples_per_s) const { return samples_per_s / (1 + low.offset); }
  double slowest(double samples_per_s) const { return samples_per_s / (1 + high.offset); }
  // "flash-attention -19.5% (3 cases) to deepspeed +16.6% (2 cases) of the model, spread 10.4%".
  std::string describe() const;
};

// A software enters the band with this many throughput cases or more.
inline constexpr int kFrameworkMinCases = 2;

// From a run with its leave-one-source-out errors; softwares named "unstated" are left out.
FrameworkTerm framework_term(const ValidationRun& run);

// The built-in set's term, computed once.
const FrameworkTerm& builtin_framework_term();

}  // namespace loom::perf
