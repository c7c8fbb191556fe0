// Settings of the parameter-server strategy (sync = "ps"), read from the config by the run plan
// (plan/sync_reader.h):
//   ps.servers   = 1          server shards, each over a contiguous key range of the flat buffer
//   ps.staleness = 0          0: synchronous; k > 0: a worker may run up to k steps ahead of
//                             the slowest (stale synchronous parallel, Ho et al., NIPS 2013)
//   ps.placement = "threads"  "threads": one server thread per shard inside the process;
//                             "ranks": the last ps.servers ranks of the world are servers
//   ps.exact_delay = false    with staleness k, compute on the version exactly k steps old
//                             (deterministic; the worst case) instead of the newest arrived
// The gradient buckets are the allreduce strategy's (sync.bucket_kib, sync.overlap).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config_value.h"
#include "loom/optim/optimizer.h"

namespace loom::sync {

enum class PsPlacement { kThreads, kRanks };

struct PsOptions {
  int servers = 1;
  int staleness = 0;
  PsPlacement placement = PsPlacement::kThreads;
  bool exact_delay = false;
  // Staleness k > 0 (see ps_strategy.h): compute on the parameters extrapolated along the
  // servers' momentum to the version the gradient will be applied to (ps.lookahead, on by
  // default); optionally divide the learning rate by k (ps.stale_lr = "divide", off).
  bool lookahead = true;
  bool divide_lr = false;
  float momentum = 0;  // the servers' optimizer momentum (SGD's optim.momentum; 0 for Adam)
  int64_t bucket_bytes = 4 << 20;
  bool overlap = true;
  std::string servers_where = "ps.servers";  // where ps.servers was set, for errors
  // The servers' optimizer (optim.*) and, with placement "threads", their private world's
  // communicator settings (comm.*).
  optim::OptimizerOptions optimizer;
  comm::CommOptions comm;
};

std::vector<ConfigKeySpec> ps_config_keys();

}  // namespace loom::sync
