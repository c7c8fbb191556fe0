// A sync strategy makes the replicas agree (docs/architecture.md, "Strategy"). The training loop
// tells it when a step begins, when each group of gradients is ready during backward, and when
// backward is done; the strategy owns communication, codec residuals and the parameter
// update, so the loop does not know which strategy runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model.h"
#include "loom/optim/optimizer.h"

namespace loom::sync {

struct SyncStats {
  double comm_seconds = 0;     // time spent communicating (and updating, where fused)
  double exposed_seconds = 0;  // time the training loop waited for it
  // The part of exposed_seconds spent inside backward (buckets combined on the compute thread
  // as they became ready), which the loop's compute time also holds.
  double exposed_in_compute = 0;
  int64_t bytes_sent = 0;      // payload bytes this rank handed to the transport
  int64_t bytes_received = 0;  // payload bytes it received (the parameter server's pulls)
  // Synchronisations this rank took part in: one per step for allreduce and model
  // parallelism (with more than one worker), one per push and pull for the parameter server,
  // one per block for block momentum. train.accumulate = k makes it one per k micro-batches.
  int64_t exchanges = 0;
  void add(const SyncStats& o) {
    comm_seconds += o.comm_seconds;
    exposed_seconds += o.exposed_seconds;
    exposed_in_compute += o.exposed_in_compute;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    exchanges += o.exchanges;
  }
};

// A strategy's own state for checkpoints (codec residuals, block momentum, server shards), as
// named sections. Names use [A-Za-z0-9._-] only. Each rank saves and restores its own set (the
// checkpoint keeps one per rank: docs/checkpoint.md). The parameters and the optimizer's
// state()/steps() are saved by the checkpoint itself; put here only what else the next steps
// depend on.
struct StrategyState {
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<uint8_t>> bytes;
  bool empty() const { return floats.empty() && bytes.empty(); }
  // The section `name`, which must hold exactly `size` elements, else InputError naming it
  // (a checkpoint from another config or world size).
  const std::vector<float>& need_floats(const std::string& name, size_t size) const {
    return need(floats, name, size);
  }
  const std::vector<uint8_t>& need_bytes(const std::string& name, size_t size) const {
    return need(bytes, name, size);
  }

 private:
  template <typename T>
  static const std::vector<T>& need(const std::map<std::string, std::vector<T>>& m,
                                    const std::string& name, size_t size) {
    auto it = m.find(name);
    if (it == m.end())
      throw InputError(
          fmt::format("checkpoint: strategy state has no section '{}' (written "
                      "with another sync strategy or config?)",
                      name));
    if (it->second.size() != size)
      throw InputError(
          fmt::format("checkpoint: strategy section '{}' holds {} elements, this "
                      "run needs {} (another config or world size?)",
                      name, it->second.size(), size));
    return it->second;
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
  // Checkpoints (src/loom/train/checkpoint.h). save_state is called between steps (after
  // end_step returned, never during a step; every rank calls it at the same step, so it may
  // communicate). restore_state is called on a resumed run after start() and before the first
  // step, with what save_state gave on the same rank of a run with the same config and world
  // size; afterwards the next steps must give bitwise what they would have given without the
  // interruption (the training loop restores parameters and optimizer state before start()).
  // A missing or mis-sized section is an InputError naming it (StrategyState::need_*). The
  // skip policy for NaN steps (train.nan_policy) also uses this pair to roll a step back.
  // Default: no state beyond parameters and optimizer.
  virtual void save_state(StrategyState& out) const { (void)out; }
  virtual void restore_state(const StrategyState& in) { (void)in; }
  // A resume on another world size (docs/checkpoint.md, "Another world size"): `ranks` holds
  // what save_state gave on each rank of the checkpoint's world, in rank order. Called instead
  // of restore_state, after start(). Restores this rank's share of that state and returns what
  // could not be carried over exactly, for one line of the log ("" when all of it was).
  // ConfigError where the strategy's state cannot be resharded. Default: a strategy with no
  // state of its own has nothing to reshard; one that saved some refuses.
  virtual std::string restore_resharded(const std::vector<StrategyState>& ranks);
  // The elements of the optimizer's state this rank updates, as (offset, count); the rest of
  // its buffers is never read (the sharded optimizer, ZeRO-1). Checkpoints record them, so a
  // resume on another world size can put the whole state together. Empty: all of it.
  virtual std::vector<std::pair<int64_t, int64_t>> optimizer_owned() const { return {}; }
  // Where the parameters stop being the same on every rank: [0, offset) are replicated (a
  // checkpoint keeps rank 0's copy), [offset, num_params) are this rank's own (model-parallel
  // slices: each rank's checkpoint file keeps its own, and their count may differ by rank).
  // -1: every parameter is replicated.
  virtual int64_t rank_local_params_offset() const { return -1; }
  // Statistics since the last call.
  SyncStats take_stats() {
    SyncStats s = stats_;
    stats_ = {};
    return s;
  }

 protected:
  SyncStats stats_;
};

}  // namespace loom::sync
