// One training run's plan: every key of its config read once, into the options each unit
// takes. `loom train`, the Python package and the experiments make it from a config
// (read_run_plan); train runs it and never sees the config.
//
// What a run decides at its start is a revised plan, made here: output.dir numbered, the batch
// of a resume on another world size, BatchNorm's inline combine, and auto's choice of codec,
// strategy and bucket size. The plan's text is the config with those revisions, so config.toml
// and every checkpoint say what ran.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config_value.h"
#include "loom/core/log.h"
#include "loom/core/trace.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_spec.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"
#include "loom/perf/workload.h"
#include "loom/plan/auto_reader.h"
#include "loom/plan/saved_run.h"
#include "loom/plan/train_settings.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/sync/ps/ps_options.h"
#include "loom/sync/strategy.h"

namespace loom {
class Config;
}

namespace loom::plan {

// Auto's choice of codec, sync and sync.bucket_kib (each unset: not chosen, the key as it was),
// and its record: auto.machine (where the choice was made) and auto.revised (what the check
// switched, at which step).
struct SyncChoice {
  std::optional<std::string> codec, sync;
  std::optional<int64_t> bucket_kib;
  std::string machine, revised;
};

struct RunPlan {
  // The config the plan was read from, with every revision written into it. Only plan's
  // functions read it: the strategy's refusals name a key's line, and a revision is read again
  // as a whole so that a revised plan is checked as a given one is.
  std::shared_ptr<const Config> source;
  std::string text;  // source's canonical text: config.toml, checkpoints, the ranks' check

  std::string output_dir;  // output.dir with "{n}" as given ("" = write nothing)
  std::string output_dir_where;
  LogLevel log_level = LogLevel::kInfo;
  std::string transport;  // resolved ("auto" is never left here)
  int workers = 1;        // 0 under a launcher that sets the world size
  comm::CommOptions comm;
  trace::Options trace;

  TrainSettings settings;
  GuardOptions guard;
  std::string batch_where, precision_where, max_classes_where;
  data::PipelineConfig pipeline;
  nn::ModelSpec model;
  nn::LossOptions loss;
  optim::OptimizerOptions optimizer;
  optim::LrScheduleOptions schedule;
  float clip_norm = 0;

  // sync, its strategy and its auto choice.
  bool ps_on_ranks = false;  // sync = "ps" with ps.placement = "ranks"
  sync::PsOptions ps;
  std::string parallel_mode = "data", parallel_where;
  // codec, sync and sync.bucket_kib; each "auto" (and its value here unset) until auto chose.
  bool codec_auto = false, sync_auto = false, bucket_auto = false;
  std::string codec;      // a registered codec's name
  std::string sync_kind;  // "allreduce", "bmuf" or "ps"
  std::string codec_where, sync_where;
  int64_t bucket_kib = 4096;
  sync::OverlapSetting overlap;  // sync.overlap
  bool shard_optimizer = true;   // sync.shard_optimizer
  int64_t bmuf_tau = 8;
  AutoOptions auto_options;
  // The model is the default MLP on the default data: no graph, layers or training shards were
  // given.
  bool default_model_and_data = true;

  bool wants_auto() const { return codec_auto || sync_auto || bucket_auto; }
};

// Reads and checks the whole plan: unknown keys, ranges, and the pairs of keys that do not go
// together (ConfigError naming the key and its line).
RunPlan read_run_plan(const Config& cfg);

// The revisions a run makes at its start; each returns the plan read again from its revised
// config, with `why` recorded as the changed keys' source.
RunPlan with_output_dir(const RunPlan& plan, const std::string& dir);
RunPlan with_batch(const RunPlan& plan, int64_t batch, const std::string& why);
// A layer that sums statistics across workers in forward and backward (BatchNorm with sync) does
// so on the compute thread, so no collective of the strategy may run on another thread then.
// ConfigError when the run's sync or parallelism cannot do that.
RunPlan with_inline_combine(const RunPlan& plan, const std::string& why);
// Auto's choice for the keys that were "auto" (codec_auto, sync_auto, bucket_auto), with its
// record (auto.machine, auto.revised).
RunPlan with_sync_choice(const RunPlan& plan, const SyncChoice& choice, const std::string& why);

// The choice a checkpoint's config recorded (its text, as the checkpoint holds it; `where` names
// it in errors).
SyncChoice saved_sync_choice(const std::string& config_text, const std::string& where);

// What a finished run's config says of its model and data (saved_run.h), as this plan holds it.
SavedRun saved_run(const RunPlan& plan);

// With data given in memory, the keys that name data files would be silently ignored:
// ConfigError naming the key.
void refuse_data_files(const RunPlan& plan);

// The sync strategy of the plan (strategy_factory.h), and its model: the layers of
// parallel = "model" | "hybrid" are sliced over `comm`.
std::unique_ptr<sync::Strategy> make_strategy(const RunPlan& plan, comm::Communicator& comm,
                                              nn::Model& model, optim::Optimizer& optimizer,
                                              int64_t total_steps);
std::unique_ptr<nn::Model> build_model(const RunPlan& plan, comm::Communicator& comm,
                                       Backend& backend, const nn::Shape& input_shape,
                                       int num_classes);
// Whether the buckets combine on a communication thread (sync.overlap, sync/overlap_policy.h):
// for the run's communicator, or for `workers_on_host` workers on a host of `host_cores`.
bool overlap(const RunPlan& plan, const comm::Communicator& comm);
bool overlap(const RunPlan& plan, int workers_on_host, int host_cores, bool device_transport);

// The cost model's workload of the plan's model (plan/workload_reader.h).
perf::Workload read_workload(const RunPlan& plan, const std::string& name);

// The plan read again with `settings` set (a sweep's trial, a validation run's case); `why` is
// their source in errors.
RunPlan with_settings(const RunPlan& plan,
                      const std::vector<std::pair<std::string, ConfigScalar>>& settings,
                      const std::string& why);

}  // namespace loom::plan
