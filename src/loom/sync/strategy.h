// A sync strategy makes the replicas agree (ARCHITECTURE.md, "Strategy"). The training loop
// tells it when a step begins, when each group of gradients is ready during backward, and when
// backward is done; the strategy owns communication, codec residuals and the parameter
// update, so the loop does not know which strategy runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"
#include "loom/nn/model.h"
#include "loom/optim/optimizer.h"

namespace loom::sync {

struct SyncStats {
  double comm_seconds = 0;     // time spent communicating (and updating, where fused)
  double exposed_seconds = 0;  // time the training loop waited for it
  int64_t bytes_sent = 0;      // payload bytes this rank handed to the transport
  int64_t bytes_received = 0;  // payload bytes it received (the parameter server's pulls)
  void add(const SyncStats& o) {
    comm_seconds += o.comm_seconds;
    exposed_seconds += o.exposed_seconds;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
  }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string describe() const = 0;
  // Before the first step: make every replica start from rank 0's parameters.
  virtual void start() = 0;
  // The loop's gradient scale for the loss of `local_batch` samples on this rank, chosen so
  // that what the strategy combines is the mean over the global batch.
  virtual float grad_scale(int64_t local_batch) const = 0;
  virtual void begin_step(int64_t step, float lr) = 0;
  // During backward, in reverse layer order (Model::backward's on_ready).
  virtual void on_gradients_ready(const nn::ParamRange& range) = 0;
  // After backward: completes communication; the parameters are updated on return.
  virtual void end_step() = 0;
  // After the last step (block momentum folds in its last partial block here).
  virtual void finish() {}
  // Statistics since the last call.
  SyncStats take_stats() {
    SyncStats s = stats_;
    stats_ = {};
    return s;
  }

 protected:
  SyncStats stats_;
};

std::vector<ConfigKeySpec> sync_config_keys();
// Keys: sync ("allreduce" | "bmuf"), sync.bucket_kib, sync.overlap, sync.shard_optimizer,
// bmuf.* (bmuf_strategy.h) and codec.* (compress/registry.h). A single
// worker runs the same strategy over a world of one.
std::unique_ptr<Strategy> make_strategy(const Config& cfg, comm::Communicator& comm,
                                        nn::Model& model, optim::Optimizer& optimizer);

}  // namespace loom::sync
