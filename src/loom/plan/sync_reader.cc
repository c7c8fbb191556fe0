#include "loom/plan/sync_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/compress/registry.h"
#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/train_settings.h"

namespace loom::plan {

bool is_auto(const Config& cfg, const std::string& key) {
  if (!cfg.has(key)) return false;
  const ConfigValue& v = cfg.values().at(key);
  return !v.is_array && std::holds_alternative<std::string>(v.value) &&
         std::get<std::string>(v.value) == "auto";
}

std::string read_sync_kind(const Config& cfg) {
  return cfg.get_choice("sync", "allreduce", {"allreduce", "bmuf", "ps"});
}

int64_t read_bucket_kib(const Config& cfg) {
  return cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30);
}

sync::PsOptions read_ps_options(const Config& cfg) {
  // Workers push gradients and pull parameters in fp32: a lossy codec would be ignored without
  // a word, and config.toml would record a codec the run never used. ("auto" is auto's to
  // decide; it does not weigh the parameter server.)
  const std::string key = codec_key(cfg);
  const std::string codec = cfg.get_string(key, "fp32");
  if (codec != "auto" && compress::codec_kind(codec, cfg.where(key)).lossy)
    throw ConfigError(fmt::format(
        "{}: key '{}': codec {} does not apply to sync = \"ps\" ({}): the parameter server "
        "pushes gradients and pulls parameters in fp32; compress with sync = \"allreduce\" or "
        "\"bmuf\", or leave the codec fp32",
        cfg.where(key), key, codec, cfg.where("sync")));
  if (codec != "auto") refuse_other_codec_keys(cfg, codec);
  sync::PsOptions o;
  o.servers = int(cfg.get_int("ps.servers", 1, 1, 4096));
  o.servers_where = cfg.where("ps.servers");
  o.staleness = int(cfg.get_int("ps.staleness", 0, 0, 1000));
  o.placement = cfg.get_choice("ps.placement", "threads", {"threads", "ranks"}) == "ranks"
                    ? sync::PsPlacement::kRanks
                    : sync::PsPlacement::kThreads;
  o.exact_delay = cfg.get_bool("ps.exact_delay", false);
  o.bucket_bytes = read_bucket_kib(cfg) << 10;
  o.overlap = push_during_backward_from_config(cfg);
  o.lookahead = cfg.get_bool("ps.lookahead", true);
  o.divide_lr = cfg.get_choice("ps.stale_lr", "none", {"divide", "none"}) == "divide";
  if (o.staleness == 0) {
    // Which stale version to compute on, and how to scale for it, mean nothing when every
    // worker computes on the newest parameters.
    const std::string why =
        fmt::format("applies to bounded staleness; ps.staleness is 0 ({}): synchronous",
                    cfg.where("ps.staleness"));
    refuse_unless_default(cfg, "ps.exact_delay", false, why);
    refuse_unless_default(cfg, "ps.lookahead", true, why);
    refuse_unless_default(cfg, "ps.stale_lr", std::string("none"), why);
  }
  o.optimizer = read_optimizer_options(cfg);
  if (o.optimizer.name == "sgd") o.momentum = o.optimizer.momentum;
  o.comm = read_comm_options(cfg);
  return o;
}

bool ps_on_ranks(const Config& cfg) {
  if (is_auto(cfg, "sync") || read_sync_kind(cfg) != "ps") return false;
  return read_ps_options(cfg).placement == sync::PsPlacement::kRanks;
}

sync::ParallelOptions read_parallel_options(const Config& cfg) {
  sync::ParallelOptions o;
  if (cfg.has("parallel") && cfg.has("parallel.mode"))
    throw ConfigError(
        fmt::format("{}: keys 'parallel' and 'parallel.mode' ({}) are both set; "
                    "keep one",
                    cfg.where("parallel"), cfg.where("parallel.mode")));
  const std::string key = cfg.has("parallel.mode") ? "parallel.mode" : "parallel";
  o.mode = cfg.get_choice(key, "data", {"data", "model", "hybrid"});
  o.where = cfg.where(key);
  o.activations = cfg.get_choice("parallel.activations", "fp32", {"fp32", "int8"});
  auto it = cfg.values().find("parallel.linear");
  if (it != cfg.values().end()) {
    const ConfigValue& v = it->second;
    std::vector<ConfigScalar> items = v.is_array ? v.array : std::vector<ConfigScalar>{v.value};
    for (const auto& item : items) {
      const std::string* s = std::get_if<std::string>(&item);
      static const std::vector<std::string> ok = {"auto", "column", "row", "replicated", "data"};
      if (!s || std::find(ok.begin(), ok.end(), *s) == ok.end())
        throw ConfigError(
            fmt::format("{}: key 'parallel.linear': {} is not one of auto, column, "
                        "row, replicated, data",
                        v.where, config_scalar_text(item)));
      o.linear.push_back(*s);
    }
  }
  if (o.mode == "data") {
    // Data parallelism keeps every layer whole and exchanges no activations.
    const std::string why =
        fmt::format("lays out model-parallel layers; parallel is \"data\" ({})", cfg.where(key));
    refuse_unless_default(cfg, "parallel.activations", std::string("fp32"), why);
    if (cfg.has("parallel.linear")) refuse_key(cfg, "parallel.linear", why);
  }
  return o;
}

sync::OverlapSetting read_overlap_setting(const Config& cfg) {
  using sync::OverlapSetting;
  if (!cfg.has("sync.overlap")) return OverlapSetting::kAuto;
  const ConfigValue& v = cfg.values().at("sync.overlap");
  if (!v.is_array && std::holds_alternative<std::string>(v.value)) {
    const std::string s = std::get<std::string>(v.value);
    if (s != "inline")
      throw ConfigError(fmt::format(
          "{}: key 'sync.overlap': expected true, false or \"inline\", got \"{}\"", v.where, s));
    return OverlapSetting::kInline;
  }
  // ConfigError if not a bool.
  return cfg.get_bool("sync.overlap", true) ? OverlapSetting::kOn : OverlapSetting::kOff;
}

bool overlap_from_config(const Config& cfg, int workers_on_host, int host_cores,
                         bool device_transport) {
  return sync::resolve_overlap(read_overlap_setting(cfg), workers_on_host, int(read_threads(cfg)),
                               host_cores, device_transport);
}

bool overlap_from_config(const Config& cfg, const comm::Communicator& comm) {
  return sync::resolve_overlap(read_overlap_setting(cfg), int(read_threads(cfg)), comm);
}

bool inline_combine_from_config(const Config& cfg, bool overlap) {
  return sync::inline_combine(read_overlap_setting(cfg), overlap);
}

bool push_during_backward_from_config(const Config& cfg) {
  return sync::push_during_backward(read_overlap_setting(cfg));
}

std::unique_ptr<nn::Model> build_model(const Config& cfg, comm::Communicator& comm,
                                       Backend& backend, const nn::Shape& input_shape,
                                       int num_classes) {
  const sync::ParallelOptions parallel = read_parallel_options(cfg);
  const nn::ModelSpec spec = read_model_spec(cfg);
  const uint64_t seed = uint64_t(cfg.get_int("seed", 0, 0, INT64_MAX));
  return sync::build_model(spec, parallel, seed, comm, backend, input_shape, num_classes);
}

}  // namespace loom::plan
