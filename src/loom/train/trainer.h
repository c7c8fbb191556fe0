// The training loop: every worker trains a replica on its shard of each global batch and a
// sync strategy makes the replicas agree. Workers are threads of this process (transport
// "thread") or MPI ranks (one per process).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/config.h"

namespace loom::train {

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  int64_t steps = 0;
  double train_loss = 0, train_acc = 0, test_acc = -1;
  double seconds = 0;  // training loop wall time, evaluation excluded
  double samples_per_s = 0;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, loader_wait_s = 0;
  int64_t bytes_sent = 0;
};

struct TrainResult {
  std::vector<EpochMetrics> epochs;
  double test_acc = -1;
  double samples_per_s = 0;  // over all epochs' training loops
  int world = 1;
  int64_t steps = 0;
  std::string describe;             // model, optimizer, strategy
  std::vector<float> final_params;  // rank 0's parameters at the end
  bool interrupted = false;         // stopped by SIGINT/SIGTERM (after writing a checkpoint)
  std::string checkpoint;           // the last checkpoint written ("" = none)
};

// Runs `loom train` for a resolved config (unknown keys already rejected by the caller or
// here). Throws loom::Error subclasses for bad config, bad data, lost peers and NaN loss.
TrainResult run_training(const Config& cfg);

}  // namespace loom::train
