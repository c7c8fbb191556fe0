// What codec = "auto" / sync = "auto" measure in a run's first seconds (perf/auto_choice.h):
// the step's compute on the run's own graph, the run's own transport at its bucket sizes, and
// each candidate codec's encode and decode speed on this machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/nn/graph/model.h"
#include "loom/perf/auto_choice.h"

namespace loom::measure {

struct AutoProbeOptions {
  int64_t batch = 128;                  // per worker
  std::vector<size_t> allreduce_bytes;  // sizes to time: the run's bucket sizes
  std::vector<std::string> codecs;      // lossy codecs whose speed to measure
  int compute_reps = 3;                 // timed steps after one warm-up step
  int allreduce_reps = 3;               // per size, after one warm-up call
  int codec_reps = 3;                   // encodes and decodes per codec, after a warm-up
  // Values a codec is timed on, at most: one bucket of the run's default size (4 MiB), not
  // the whole gradient; a codec's passes take a time proportional to the values.
  size_t codec_values = size_t(1) << 20;
  // Repeats beyond the first at the largest allreduce size, and codec repeats beyond the first,
  // are taken only while the measuring stays within this share of `budget_steps` steps at the
  // measured compute time (the bound is 2% of a 1,000-step run; the compute step is
  // the shortest a step can be, so the bound holds for the real step too).
  double budget_share = 0.01;
  int64_t budget_steps = 1000;
};

// Collective: every rank of `comm` calls it at once, each with a model of the run's graph
// that the run does not train (its parameters and gradients are overwritten). The ranks
// measure side by side, so the figures hold the contention a run meets; then they average
// them by an allreduce, so every rank decides on the same numbers. Host memory only.
perf::AutoMeasurements probe_for_auto(comm::Communicator& comm, nn::Model& model,
                                      const AutoProbeOptions& o);

}  // namespace loom::measure
