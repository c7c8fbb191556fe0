// A tiny data-parallel training loop for strategy tests: a 20-feature, 10-class synthetic
// problem (Gaussian blobs), an MLP from the zoo, N workers as threads. Each step, worker r
// takes its slice of the global batch, exactly as the real loop (train/trainer.cc) does, and
// drives the strategy through begin_step / on_gradients_ready / end_step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/tiny_run.h"
#include "loom/comm/communicator.h"
#include "loom/core/config.h"
#include "loom/nn/graph/model.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/strategy_factory.h"
#include "loom/sync/strategy.h"

namespace loom::sync::testing {

struct TinyRun {
  std::vector<float> init_params;   // after start() (rank 0's, broadcast)
  std::vector<float> final_params;  // rank 0's, after finish()
  bool replicas_equal = true;       // every rank ended with rank 0's bits
  std::vector<double> loss;         // mean training loss per step over all workers
  SyncStats stats;                  // rank 0's, whole run
  std::string describe;
  // Mean of loss over steps [from, to).
  double mean_loss(size_t from, size_t to) const;
};

using StrategyMaker =
    std::function<std::unique_ptr<Strategy>(comm::Communicator&, nn::Model&, optim::Optimizer&)>;

// cfg: model/optim/sync/codec keys (defaults: mlp.hidden = [32], no dropout, SGD lr 0.1,
// momentum 0). make: builds the strategy (default: plan::make_strategy(cfg, ...)).
TinyRun run_tiny(const Config& cfg, int workers, int steps, int batch_per_worker,
                 const StrategyMaker& make = nullptr);

// Config with the tiny defaults above.
Config tiny_config();

using loom::testing::max_abs_diff;

}  // namespace loom::sync::testing
