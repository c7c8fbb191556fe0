// The fidelity of each candidate codec on a run's own gradients (perf/codec_fidelity.h): every
// step of a window, one worker's gradient is replayed through each codec with its error
// feedback, one state per layer as the strategy keeps one per bucket, and the decoded gradient
// feeds a copy of the run's optimizer; a further copy takes the exact gradient. The copies run
// on the host, from the run's parameters at the window's start and with no optimizer state
// (as at a run's start: the window is a run's first steps unless a resume on another machine
// decides anew), with the run's learning rate of each step.
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

// Past this many parameters the replay runs on a sample, so that it costs about this many
// elements' work per codec and step whatever the model's size: every k-th element of each
// layer (k = ceil(parameters / this)). The optimizers are elementwise, so the sample's exact
// and replayed updates are the run's own on those elements; each codec sees a layer's sampled
// values where it would see all of them, and its per-column or per-block statistics are of
// values of the same layer. A layer's matrices (PowerSGD's view) do not survive the sampling.
inline constexpr int64_t kFidelitySampleElements = int64_t(1) << 17;

// A layer's share of the flat gradient: where it lies and its matrices (PowerSGD's view).
struct FidelitySegment {
  int64_t offset = 0, count = 0;
  std::vector<compress::MatrixDims> matrices;
};

class FidelityProbe {
 public:
  // `params`: the run's parameters at the window's start; `segments` cover them in order;
  // `max_elements`: the sample's size bound (0: every element).
  FidelityProbe(const std::vector<compress::CodecOptions>& codecs,
                const optim::OptimizerOptions& optimizer, std::span<const float> params,
                const std::vector<FidelitySegment>& segments,
                int64_t max_elements = kFidelitySampleElements);
  ~FidelityProbe();
  FidelityProbe(const FidelityProbe&) = delete;
  FidelityProbe& operator=(const FidelityProbe&) = delete;

  // One step: `grad` is one worker's gradient of the whole model, times `scale`; `lr` the
  // step's rate. A non-finite sample is skipped (the run's guard deals with the step).
  void record(std::span<const float> grad, float lr, float scale = 1.0f);
  int64_t steps() const { return steps_; }
  // Every stride-th element of each layer is replayed (1: all of them).
  int64_t stride() const { return stride_; }
  int64_t sampled() const { return n_; }
  // Each codec's figures so far, in the order given.
  std::vector<perf::CodecFidelity> figures() const;

 private:
  struct Track;
  int64_t full_ = 0, stride_ = 1, n_ = 0, steps_ = 0;  // parameters, stride, sampled
  std::vector<int64_t> index_;                         // the sampled elements
  std::vector<FidelitySegment> segments_;              // over the sample
  std::vector<float> grad_;                            // the step's sampled gradient
  std::vector<float> start_;
  std::unique_ptr<optim::Optimizer> exact_opt_;
  std::vector<float> exact_;       // the exact copy's parameters
  std::vector<float> before_;      // scratch: parameters before this step's update
  std::vector<float> update_;      // scratch: the exact update of this step
  std::vector<double> grad_norm_;  // |gradient| of each step
  std::vector<std::unique_ptr<Track>> tracks_;
};

}  // namespace loom::measure
