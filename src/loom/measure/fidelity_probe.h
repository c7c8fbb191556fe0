// The fidelity of each candidate codec on a run's own gradients (perf/codec_fidelity.h): every
// step of a window, one worker's gradient is replayed through each codec with its error
// feedback, one state per layer as the strategy keeps one per bucket, and the decoded gradient
// feeds a copy of the run's optimizer; a further copy takes the exact gradient. The copies run
// on the host, from the run's parameters at the window's start, with the run's learning rate
// of each step.
//
// What it leaves out, so that the figures are a proxy the calibration then maps: the second
// quantisation of the two-stage exchange (the owners' re-encoding of the sum), the codecs'
// own run-time options that act outside encode/decode (the 1-bit warm-up, momentum
// correction), gradient clipping, and that the gradients came from the run's own parameters
// rather than from each copy's. Memory: per codec two copies of the parameters and the
// optimizer's state, on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/compress/codec_options.h"
#include "loom/optim/optimizer.h"
#include "loom/perf/codec_fidelity.h"
#include "loom/tensor/buffer.h"

namespace loom::measure {

// A layer's share of the flat gradient: where it lies and its matrices (PowerSGD's view).
struct FidelitySegment {
  int64_t offset = 0, count = 0;
  std::vector<compress::MatrixDims> matrices;
};

class FidelityProbe {
 public:
  // `params`: the run's parameters at the window's start; `segments` cover them in order.
  FidelityProbe(const std::vector<compress::CodecOptions>& codecs,
                const optim::OptimizerOptions& optimizer, std::span<const float> params,
                std::vector<FidelitySegment> segments);
  ~FidelityProbe();
  FidelityProbe(const FidelityProbe&) = delete;
  FidelityProbe& operator=(const FidelityProbe&) = delete;

  // One step: `grad` is one worker's gradient of the whole model, `lr` the step's rate. A
  // non-finite gradient is skipped (the run's guard deals with it).
  void record(std::span<const float> grad, float lr);
  int64_t steps() const { return steps_; }
  // Each codec's figures so far, in the order given.
  std::vector<perf::CodecFidelity> figures() const;

 private:
  struct Track;
  int64_t n_ = 0, steps_ = 0;
  std::vector<FidelitySegment> segments_;
  std::vector<float> start_;
  std::unique_ptr<optim::Optimizer> exact_opt_;
  std::vector<float> exact_;   // the exact copy's parameters
  std::vector<float> before_;  // scratch: parameters before this step's update
  std::vector<float> update_;  // scratch: the exact update of this step
  std::vector<std::unique_ptr<Track>> tracks_;
};

}  // namespace loom::measure
