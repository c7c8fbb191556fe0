// The sync.*, ps.* and parallel.* keys of a run's config read into the options of sync/: the
// parameter server's deployment, model parallelism's layout, and sync.overlap; and the
// model-parallel model built from a config.
#pragma once

#include <memory>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"
#include "loom/nn/graph/model.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/ps/ps_options.h"

namespace loom::plan {

// A key set to "auto" (codec, sync and sync.bucket_kib are chosen at a run's start).
bool is_auto(const Config& cfg, const std::string& key);
// sync: "allreduce", "bmuf" or "ps"; ConfigError naming the key otherwise (also for "auto",
// which must be chosen first).
std::string read_sync_kind(const Config& cfg);
// sync.bucket_kib: the gradient bucket in KiB, [0, 2^30] (0: one bucket).
int64_t read_bucket_kib(const Config& cfg);

// sync = "ps": ps.*, the bucket size and overlap, and the servers' optimizer and communicator
// settings. ConfigError naming the key for a value out of range, a lossy codec (the parameter
// server moves fp32), or a staleness option without staleness.
sync::PsOptions read_ps_options(const Config& cfg);
// True when sync = "ps" and ps.placement = "ranks": the world then holds the servers too.
bool ps_on_ranks(const Config& cfg);

// parallel (or parallel.mode), parallel.activations, parallel.linear.
sync::ParallelOptions read_parallel_options(const Config& cfg);

// sync.overlap: unset, true, false or "inline"; ConfigError naming the key for anything else.
sync::OverlapSetting read_overlap_setting(const Config& cfg);
// The overlap decision of sync/allreduce/overlap_policy.h with the config's sync.overlap and
// `threads`.
bool overlap_from_config(const Config& cfg, int workers_on_host, int host_cores,
                         bool device_transport);
bool overlap_from_config(const Config& cfg, const comm::Communicator& comm);
bool inline_combine_from_config(const Config& cfg, bool overlap);
bool push_during_backward_from_config(const Config& cfg);

// The config's model (model_reader.h) laid out for its `parallel` keys, with its `seed`.
std::unique_ptr<nn::Model> build_model(const Config& cfg, comm::Communicator& comm,
                                       Backend& backend, const nn::Shape& input_shape,
                                       int num_classes);

}  // namespace loom::plan
