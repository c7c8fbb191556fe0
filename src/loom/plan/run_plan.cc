#include "loom/plan/run_plan.h"

#include <fmt/format.h>

#include <functional>
#include <variant>
#include <vector>

#include "loom/comm/transport_registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/data_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/run_keys.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/sync_reader.h"
#include "loom/plan/workload_reader.h"

namespace loom::plan {
namespace {

// backend = "cuda" computes on device memory, which only a transport of device buffers carries;
// such a transport's workers compute on their GPUs.
void check_backend_fits_transport(const Config& cfg, const std::string& transport) {
  const std::string backend = cfg.get_choice("backend", "cpu", {"cpu", "cuda"});
  const bool device_transport = comm::transport_kind(transport).device_memory;
  if (backend == "cuda" && !device_transport) {
    std::vector<std::string> device;
    for (const comm::TransportKind& k : comm::transport_kinds())
      if (k.device_memory) device.push_back("\"" + k.name + "\"");
    throw ConfigError(fmt::format(
        "{}: key 'backend': \"cuda\" trains on device memory, which only the {} transport "
        "carries: set transport = {} (transport is \"{}\")",
        cfg.where("backend"), fmt::join(device, " or "), fmt::join(device, " or "), transport));
  }
  if (device_transport) {
    if (backend != "cuda")
      throw ConfigError(
          fmt::format("{}: key 'transport': \"{}\" carries device memory: set backend = "
                      "\"cuda\"",
                      cfg.where("transport"), transport));
    check_device_sync(cfg);
  }
}

// The keys of sync, its strategy and auto.
void read_sync(const Config& cfg, RunPlan& p) {
  p.codec_auto = is_auto(cfg, codec_key(cfg));
  if (!p.codec_auto) p.codec = codec_name(cfg);
  p.codec_where = cfg.where(codec_key(cfg));
  p.sync_auto = is_auto(cfg, "sync");
  if (!p.sync_auto) p.sync_kind = read_sync_kind(cfg);
  p.sync_where = cfg.where("sync");
  p.bucket_auto = is_auto(cfg, "sync.bucket_kib");
  if (!p.bucket_auto) p.bucket_kib = read_bucket_kib(cfg);
  // Another strategy's keys are refused by name when its strategy is built (strategy_factory.h),
  // so they are read only where they apply.
  if (p.sync_auto || p.sync_kind == "bmuf")
    p.bmuf_tau = cfg.get_int("bmuf.tau", 8, 1, int64_t(1) << 30);
  if (p.sync_kind == "ps") p.ps = read_ps_options(cfg);
  p.ps_on_ranks = ps_on_ranks(cfg);
  p.overlap = read_overlap_setting(cfg);
  p.shard_optimizer = cfg.get_bool("sync.shard_optimizer", true);
  p.parallel_mode = read_parallel_options(cfg).mode;
  p.parallel_where = cfg.where(cfg.has("parallel.mode") ? "parallel.mode" : "parallel");
  p.auto_options = read_auto_options(cfg);
}

// 1-bit Adam exchanges its momentum through the allreduce strategy (its servers and blocks have
// no such exchange), with the codec the config names: auto does not weigh it.
void check_onebit_adam_sync(const RunPlan& p) {
  if (p.codec_auto || p.sync_auto)
    throw ConfigError(fmt::format(
        "{}: codec/sync = \"auto\" do not weigh optim.name = \"onebit_adam\", which exchanges "
        "its momentum with the codec set (onebit by default) through sync = \"allreduce\"",
        p.sync_auto ? p.sync_where : p.codec_where));
  if (p.sync_kind != "allreduce")
    throw ConfigError(fmt::format(
        "{}: key 'sync': optim.name = \"onebit_adam\" exchanges its momentum through sync = "
        "\"allreduce\", not \"{}\"",
        p.sync_where, p.sync_kind));
}

RunPlan read(std::shared_ptr<const Config> source) {
  const Config& cfg = *source;
  RunPlan p;
  p.text = cfg.canonical_text();
  p.output_dir = read_output_dir(cfg);
  p.output_dir_where = cfg.where("output.dir");
  p.log_level = parse_log_level(cfg.get_string("log.level", "info"));
  p.transport = comm::resolve_transport(cfg.get_string("transport", "auto"));
  check_backend_fits_transport(cfg, p.transport);
  // Under a launcher (MPI) the world size is the launcher's; `workers`, when given, must agree.
  const bool launched = comm::transport_uses_launcher(p.transport);
  p.workers = int(cfg.get_int("workers", launched ? 0 : 1, launched ? 0 : 1, 4096));
  p.comm = read_comm_options(cfg);
  p.trace = trace::options_from_config(cfg);

  p.settings = read_train_settings(cfg);
  p.guard = read_guard_options(cfg);
  p.batch_where = cfg.where("batch");
  p.precision_where = cfg.where("precision");
  p.max_classes_where = cfg.where("data.max_classes");
  p.pipeline = read_pipeline_config(cfg);
  p.model = read_model_spec(cfg);
  p.loss = read_loss_options(cfg);
  p.optimizer = read_optimizer_options(cfg);
  p.schedule = read_lr_schedule_options(cfg);
  p.clip_norm = read_clip_norm(cfg);
  read_sync(cfg, p);
  if (p.optimizer.name == "onebit_adam") check_onebit_adam_sync(p);

  bool graph_given = p.model.model != "mlp";
  for (const auto& [key, value] : cfg.values())
    if (key.rfind("layer", 0) == 0) graph_given = true;  // [[layer]] tables
  p.default_model_and_data = !graph_given && !cfg.has("data.train_shards");
  p.source = std::move(source);
  return p;
}

// `plan` read again after `edit` changed its config.
RunPlan revised(const RunPlan& plan, const std::function<void(Config&)>& edit) {
  auto cfg = std::make_shared<Config>(*plan.source);
  edit(*cfg);
  return read(std::move(cfg));
}

}  // namespace

RunPlan read_run_plan(const Config& cfg) {
  cfg.check_known(train_config_keys());
  return read(std::make_shared<const Config>(cfg));
}

RunPlan with_output_dir(const RunPlan& plan, const std::string& dir) {
  if (dir == plan.output_dir) return plan;
  return revised(plan, [&](Config& cfg) { cfg.set("output.dir", dir, plan.output_dir_where); });
}

RunPlan with_batch(const RunPlan& plan, int64_t batch, const std::string& why) {
  return revised(plan, [&](Config& cfg) { cfg.set("batch", batch, why); });
}

RunPlan with_inline_combine(const RunPlan& plan, const std::string& why) {
  if (plan.sync_auto || plan.sync_kind != "allreduce")
    throw ConfigError(
        fmt::format("{}: key 'sync': {} runs with sync = \"allreduce\" only, not \"{}\"",
                    plan.sync_where, why, plan.sync_auto ? "auto" : plan.sync_kind));
  if (plan.parallel_mode != "data")
    throw ConfigError(fmt::format("{} runs with parallel = \"data\" only", why));
  if (plan.overlap == sync::OverlapSetting::kOff)
    return plan;  // combined after backward, on the compute thread as well
  return revised(plan, [&](Config& c) { c.set("sync.overlap", std::string("inline"), why); });
}

RunPlan with_sync_choice(const RunPlan& plan, const SyncChoice& choice, const std::string& why) {
  return revised(plan, [&](Config& cfg) {
    if (choice.codec) cfg.set(codec_key(cfg), *choice.codec, why);
    if (choice.sync) cfg.set("sync", *choice.sync, why);
    if (choice.bucket_kib) cfg.set("sync.bucket_kib", *choice.bucket_kib, why);
    if (!choice.machine.empty()) cfg.set("auto.machine", choice.machine, why);
    if (!choice.revised.empty()) cfg.set("auto.revised", choice.revised, why);
  });
}

SyncChoice saved_sync_choice(const std::string& config_text, const std::string& where) {
  const Config saved = Config::from_string(config_text, where);
  SyncChoice c;
  c.codec = codec_name(saved);
  c.sync = read_sync_kind(saved);
  c.bucket_kib = read_bucket_kib(saved);
  c.machine = saved.get_string("auto.machine", "");
  c.revised = saved.get_string("auto.revised", "");
  return c;
}

SavedRun saved_run(const RunPlan& plan) {
  SavedRun r;
  r.model = plan.model;
  r.loss = plan.loss;
  r.data_dir = plan.settings.data_dir;
  r.pipeline = plan.pipeline;
  r.batch = plan.settings.batch;
  r.accumulate = plan.settings.accumulate;
  return r;
}

void refuse_data_files(const RunPlan& plan) {
  refuse_data_files(*plan.source);
}

std::unique_ptr<sync::Strategy> make_strategy(const RunPlan& plan, comm::Communicator& comm,
                                              nn::Model& model, optim::Optimizer& optimizer,
                                              int64_t total_steps) {
  return make_strategy(*plan.source, comm, model, optimizer, total_steps);
}

std::unique_ptr<nn::Model> build_model(const RunPlan& plan, comm::Communicator& comm,
                                       Backend& backend, const nn::Shape& input_shape,
                                       int num_classes) {
  return build_model(*plan.source, comm, backend, input_shape, num_classes);
}

bool overlap(const RunPlan& plan, const comm::Communicator& comm) {
  return sync::resolve_overlap(plan.overlap, int(plan.settings.threads), comm);
}

bool overlap(const RunPlan& plan, int workers_on_host, int host_cores, bool device_transport) {
  return sync::resolve_overlap(plan.overlap, workers_on_host, int(plan.settings.threads),
                               host_cores, device_transport);
}

perf::Workload read_workload(const RunPlan& plan, const std::string& name) {
  return read_workload(*plan.source, name);
}

RunPlan with_settings(const RunPlan& plan,
                      const std::vector<std::pair<std::string, ConfigScalar>>& settings,
                      const std::string& why) {
  return revised(plan, [&](Config& cfg) {
    for (const auto& [key, value] : settings) cfg.set(key, value, why);
  });
}

}  // namespace loom::plan
