// The synchronisation strategy a run's config asks for (sync/strategy.h), built with the options
// of its keys: sync, sync.*, bmuf.*, ps.*, parallel.*, codec.* and the allreduce strategy's codec
// options.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"
#include "loom/nn/graph/model.h"
#include "loom/optim/optimizer.h"
#include "loom/sync/strategy.h"

namespace loom::plan {

// Every key above, for `loom train --help-config` and the check of unknown keys.
std::vector<ConfigKeySpec> sync_config_keys();

// Keys: sync ("allreduce" | "bmuf" | "ps"), sync.bucket_kib, sync.overlap, sync.shard_optimizer,
// sync.momentum_correction, sync.momentum_masking, bmuf.* (sync/bmuf_strategy.h), ps.*
// (sync/ps/ps_options.h), codec.* (compress/registry.h) and the allreduce strategy's codec
// options codec.warmup_steps, codec.aggregation and codec.min_bucket_kib. A single worker runs
// the same strategy over a world of one. total_steps: the run's length, to check
// codec.warmup_steps against (0: not known, not checked).
std::unique_ptr<sync::Strategy> make_strategy(const Config& cfg, comm::Communicator& comm,
                                              nn::Model& model, optim::Optimizer& optimizer,
                                              int64_t total_steps = 0);

// What a communicator that carries device buffers (nccl) supports: sync = "allreduce" over
// data parallelism, with fp32 or a codec that has device kernels (all but PowerSGD:
// compress/device_codec.h). ConfigError naming the key otherwise; make_strategy checks it too.
void check_device_sync(const Config& cfg);

}  // namespace loom::plan
