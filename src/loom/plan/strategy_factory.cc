#include "loom/plan/strategy_factory.h"

#include <algorithm>
#include <optional>
#include <variant>

#include "loom/comm/comm_options.h"
#include "loom/compress/device_codec.h"
#include "loom/compress/device_codec_registry.h"
#include "loom/compress/registry.h"
#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/sync_reader.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/sync/bmuf_strategy.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/model_parallel/model_parallel_strategy.h"
#include "loom/sync/ps/ps_options.h"
#include "loom/sync/ps/ps_placement.h"
#include "loom/sync/strategy.h"

namespace loom::plan {

using sync::AllreduceOptions;
using sync::AllreduceStrategy;
using sync::BmufOptions;
using sync::BmufStrategy;
using sync::CombineWhere;
using sync::model_parallel_block_index;
using sync::ModelParallelStrategy;
using sync::Strategy;

namespace {

// Whether codec/sync = "auto" chose `key`'s value: auto writes its choice where it writes its
// record of it (auto.machine, or auto.revised when the check switched). The keys of every option
// it weighed were the user's to set, whichever it picked, so they are not refused against its
// pick.
bool chosen_by_auto(const Config& cfg, const std::string& key) {
  if (!cfg.has(key)) return false;
  for (const char* record : {"auto.machine", "auto.revised"})
    if (cfg.has(record) && cfg.where(record) == cfg.where(key)) return true;
  return false;
}

// The codec the config names; nullptr for "fp32", which takes the plain collectives (they
// are exact, and the allreduce strategy can then shard the optimizer).
std::shared_ptr<const compress::Codec> codec_from_config(const Config& cfg,
                                                         const std::string& default_name = "fp32") {
  std::unique_ptr<compress::Codec> codec =
      compress::make_codec(read_codec_options(cfg, default_name));
  if (!chosen_by_auto(cfg, codec_key(cfg))) refuse_other_codec_keys(cfg, codec->name());
  if (codec->name() == "fp32") return nullptr;
  return std::shared_ptr<const compress::Codec>(std::move(codec));
}

// A key that takes true, false or "auto" (unset: auto): nullopt for auto.
std::optional<bool> bool_or_auto(const Config& cfg, const std::string& key) {
  if (!cfg.has(key)) return std::nullopt;
  const ConfigValue& v = cfg.values().at(key);
  if (!v.is_array && std::holds_alternative<std::string>(v.value)) {
    if (std::get<std::string>(v.value) == "auto") return std::nullopt;
    throw ConfigError(fmt::format("{}: key '{}': expected true, false or \"auto\", got \"{}\"",
                                  v.where, key, std::get<std::string>(v.value)));
  }
  return cfg.get_bool(key, false);  // ConfigError if not a bool
}

ConfigError bad_key(const Config& cfg, const std::string& key, const std::string& why) {
  return ConfigError(fmt::format("{}: key '{}': {}", cfg.where(key), key, why));
}

// The keys that only the allreduce strategy's compressed path reads.
const std::vector<std::string>& allreduce_codec_keys() {
  static const std::vector<std::string> keys = {"codec.warmup_steps", "codec.aggregation",
                                                "codec.min_bucket_kib", "sync.momentum_correction",
                                                "sync.momentum_masking"};
  return keys;
}

// "a, b and c" (or "or").
std::string listed(const std::vector<std::string>& names, const char* last) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? fmt::format(" {} ", last) : ", ") + names[i];
  return out;
}

// `"a" or "b"`: the codecs whose record says `pred`.
std::string quoted_names(const std::function<bool(const compress::CodecKind&)>& pred) {
  std::vector<std::string> q;
  for (const std::string& n : compress::codec_names_where(pred)) q.push_back("\"" + n + "\"");
  return listed(q, "or");
}

// The lossy codecs summed through stripes, for which codec.aggregation is a choice.
std::vector<std::string> striped_lossy_codecs() {
  return compress::codec_names_where([](const compress::CodecKind& k) {
    return k.lossy && k.aggregation == compress::Aggregation::kStripes;
  });
}

// The codecs whose record has `flag` set.
std::vector<std::string> names_of(bool compress::CodecKind::*flag) {
  return compress::codec_names_where([flag](const compress::CodecKind& k) { return k.*flag; });
}

// codec.warmup_steps' default, as --help-config shows it: "onebit: 1% of steps, <= 10; else 0".
std::string warmup_defaults() {
  std::string out;
  for (const compress::CodecKind* k : compress::codec_kinds())
    if (k->warmup_percent > 0)
      out +=
          fmt::format("{}: {}% of steps, <= {}; ", k->name, k->warmup_percent, k->warmup_max_steps);
  return out + "else 0";
}

// codec.min_bucket_kib's default: "64 (topk) / 0".
std::string min_bucket_defaults() {
  std::string out;
  for (const compress::CodecKind* k : compress::codec_kinds())
    if (k->min_bucket_kib > 0) out += fmt::format("{} ({}) / ", k->min_bucket_kib, k->name);
  return out + "0";
}

// Whether `key` (one of the above) is set to something other than what leaves it out: a
// warm-up or minimum of 0, aggregation "auto", false or "auto" for the booleans.
bool sets_something(const Config& cfg, const std::string& key) {
  if (!cfg.has(key)) return false;
  if (key == "codec.warmup_steps" || key == "codec.min_bucket_kib") return cfg.get_int(key, 0) != 0;
  if (key == "codec.aggregation") return cfg.get_string(key, "auto") != "auto";
  return bool_or_auto(cfg, key) == true;
}

// sync = "bmuf" | "ps", a model-parallel run, or codec fp32: the keys above do not apply.
void refuse_allreduce_codec_keys(const Config& cfg, const std::string& why) {
  for (const std::string& key : allreduce_codec_keys())
    if (sets_something(cfg, key)) throw bad_key(cfg, key, why);
}

// The keys of one strategy mean nothing to another: block momentum's and the parameter
// server's own keys, the overlap of buckets with backward (block momentum synchronises once per
// block, after backward; model parallelism exchanges inside its layers), the sharded optimizer
// (the allreduce strategy's alone) and the bucket size (model parallelism has no buckets).
void refuse_other_strategy_keys(const Config& cfg, const std::string& kind, bool model_parallel) {
  if (model_parallel && kind != "allreduce") return;  // make_strategy refuses the pair itself
  const std::string run =
      model_parallel
          ? fmt::format("parallel is \"{}\" ({})", read_parallel_options(cfg).mode,
                        cfg.where(cfg.has("parallel.mode") ? "parallel.mode" : "parallel"))
          : fmt::format("sync is \"{}\" ({})", kind, cfg.where("sync"));
  if (kind != "bmuf" || model_parallel) {
    const std::string why = "applies to sync = \"bmuf\"; " + run;
    refuse_unless_default(cfg, "bmuf.tau", int64_t(8), why);
    if (cfg.has("bmuf.eta")) refuse_key(cfg, "bmuf.eta", why);  // its default depends on N
    refuse_unless_default(cfg, "bmuf.zeta", 1.0, why);
    refuse_unless_default(cfg, "bmuf.nesterov", true, why);
    refuse_unless_default(cfg, "bmuf.reset_momentum", false, why);
  }
  if (kind != "ps" || model_parallel) {
    const std::string why = "applies to sync = \"ps\"; " + run;
    refuse_unless_default(cfg, "ps.servers", int64_t(1), why);
    refuse_unless_default(cfg, "ps.staleness", int64_t(0), why);
    refuse_unless_default(cfg, "ps.placement", std::string("threads"), why);
    refuse_unless_default(cfg, "ps.exact_delay", false, why);
    refuse_unless_default(cfg, "ps.lookahead", true, why);
    refuse_unless_default(cfg, "ps.stale_lr", std::string("none"), why);
  }
  if ((kind == "bmuf" || model_parallel) && cfg.has("sync.overlap"))
    refuse_key(cfg, "sync.overlap",
               "overlaps the allreduce or parameter server's buckets with backward; " + run);
  if (kind != "allreduce" || model_parallel)
    refuse_unless_default(
        cfg, "sync.shard_optimizer", true,
        "shards the optimizer of sync = \"allreduce\" over data parallelism; " + run);
  if (model_parallel)
    refuse_unless_default(
        cfg, "sync.bucket_kib", int64_t(4096),
        "sizes the buckets of data parallelism; " + run + " exchanges inside its layers");
}

// The codec options of the allreduce strategy (codec.warmup_steps, codec.aggregation,
// codec.min_bucket_kib, sync.momentum_correction, sync.momentum_masking), their defaults for
// the codec chosen, and the checks that they apply to it.
void read_allreduce_codec_options(const Config& cfg, const comm::Communicator& comm,
                                  int64_t total_steps, AllreduceOptions& opts) {
  const std::string name = opts.codec ? opts.codec->name() : "fp32";
  if (!opts.codec) {
    refuse_allreduce_codec_keys(cfg, "applies to a lossy codec; codec fp32 sums exactly");
    return;
  }
  const compress::CodecKind& kind = compress::codec_kind(name);

  // Warm-up: exact sums for the first steps, as the codec's record says (1-bit: 1% of the run,
  // at most 10 steps; none when the run's length is not known).
  const optim::OptimizerOptions optimizer = read_optimizer_options(cfg);
  const bool onebit_adam = optimizer.name == "onebit_adam";
  // 1-bit Adam's warm-up is its Adam stage, whose variance it then freezes: 15% of the run by
  // default (optim/onebit_adam.h), and at least one step.
  const int64_t auto_warmup =
      onebit_adam ? std::max<int64_t>(1, std::max<int64_t>(total_steps, 0) * 15 / 100)
                  : std::min<int64_t>(kind.warmup_max_steps, std::max<int64_t>(total_steps, 0) *
                                                                 kind.warmup_percent / 100);
  opts.codec_warmup_steps = cfg.get_int("codec.warmup_steps", auto_warmup, 0, int64_t(1) << 40);
  if (onebit_adam && opts.codec_warmup_steps < 1)
    throw bad_key(cfg, "codec.warmup_steps",
                  "optim.name = \"onebit_adam\" freezes the variance of its Adam warm-up, which "
                  "needs at least one step");
  if (total_steps > 0 && opts.codec_warmup_steps >= total_steps)
    throw bad_key(cfg, "codec.warmup_steps",
                  fmt::format("a warm-up of {} steps is not shorter than the run ({} steps): "
                              "the codec would never start",
                              opts.codec_warmup_steps, total_steps));

  // Aggregation: gather for 1-bit at two workers, where it sends the same bytes as the
  // stripes and quantises each value once instead of twice.
  const std::string agg =
      cfg.get_choice("codec.aggregation", "auto", {"auto", "stripes", "gather"});
  const bool striped = opts.codec->aggregation() == compress::Aggregation::kStripes;
  if (agg != "auto" && !striped)
    throw bad_key(cfg, "codec.aggregation",
                  fmt::format("codec {} has one way to sum ({}); the choice is for {}", name,
                              opts.codec->aggregation() == compress::Aggregation::kGather
                                  ? "gather"
                                  : "factors by allreduce",
                              listed(striped_lossy_codecs(), "and")));
  if (agg == "gather" ||
      (agg == "auto" && kind.default_aggregation(comm.size()) == compress::Aggregation::kGather))
    opts.aggregation = compress::Aggregation::kGather;

  // Small buckets exact: top-k's 1% of a small output layer starves it (docs/compress.md).
  const int64_t min_kib =
      cfg.get_int("codec.min_bucket_kib", kind.min_bucket_kib, 0, int64_t(1) << 30);
  opts.codec_min_elements = min_kib * 1024 / int64_t(sizeof(float));

  // Momentum correction: on by default for 1-bit and top-k under SGD with momentum.
  const std::optional<bool> mc = bool_or_auto(cfg, "sync.momentum_correction");
  const bool sgd = optimizer.name == "sgd";
  const bool nesterov = sgd && optimizer.nesterov;
  const float momentum = sgd ? optimizer.momentum : 0.0f;
  bool use_mc = false;
  if (mc == true) {
    auto bad = [&](const std::string& why) {
      return bad_key(cfg, "sync.momentum_correction", why);
    };
    if (!kind.momentum_correction)
      throw bad("needs codec = " +
                quoted_names([](const compress::CodecKind& k) { return k.momentum_correction; }));
    if (!sgd || nesterov) throw bad("needs optim.name = \"sgd\" without Nesterov");
    if (momentum == 0.0f) throw bad("needs optim.momentum > 0");
    if (comm.device_memory())
      throw bad(
          "keeps its velocities in host memory: not available with gradients in device "
          "memory (backend = \"cuda\")");
    use_mc = true;
  } else if (!mc.has_value()) {
    use_mc =
        kind.momentum_correction && sgd && !nesterov && momentum > 0.0f && !comm.device_memory();
  }
  if (use_mc) {
    opts.momentum_correction = momentum;
    opts.sgd_weight_decay = optimizer.weight_decay;
  }
  opts.momentum_masking = cfg.get_bool("sync.momentum_masking", false);
  if (opts.momentum_masking && !kind.momentum_masking)
    throw bad_key(cfg, "sync.momentum_masking",
                  "applies to codec = " + quoted_names([](const compress::CodecKind& k) {
                    return k.momentum_masking;
                  }) + " only");
  if (opts.momentum_masking && !use_mc)
    throw bad_key(cfg, "sync.momentum_masking",
                  "needs momentum correction (sync.momentum_correction)");
}

// 1-bit Adam exchanges its momentum through the allreduce strategy's codec over data
// parallelism; what has no combined momentum to exchange, or sends it exactly, is refused.
void check_onebit_adam(const Config& cfg, const std::string& kind, bool model_parallel,
                       float clip_norm) {
  const std::string chosen =
      fmt::format("optim.name is \"onebit_adam\" ({})", cfg.where("optim.name"));
  if (model_parallel)
    throw ConfigError(fmt::format(
        "{}: 1-bit Adam exchanges the momentum of data parallelism; parallel = \"model\"/"
        "\"hybrid\" updates its slices during backward",
        cfg.where("optim.name")));
  if (kind != "allreduce")
    throw bad_key(cfg, "sync",
                  fmt::format("1-bit Adam exchanges its momentum through the allreduce "
                              "strategy; sync is \"{}\" ({})",
                              kind, chosen));
  if (clip_norm > 0.0f)
    throw bad_key(cfg, "optim.clip_norm",
                  "1-bit Adam exchanges momenta, not gradients, after its warm-up: there is no "
                  "combined gradient to clip; " +
                      chosen);
  const std::string key = codec_key(cfg);
  if (cfg.has(key) && codec_name(cfg) == "fp32")
    throw bad_key(cfg, key,
                  "1-bit Adam sends its momentum through a lossy codec (onebit by default); with "
                  "fp32 it would be Adam with a frozen variance: use optim.name = \"adam\"; " +
                      chosen);
}

}  // namespace

std::vector<ConfigKeySpec> sync_config_keys() {
  std::vector<ConfigKeySpec> keys = {
      {"sync", ConfigType::kString, "\"allreduce\"",
       "how replicas agree: \"allreduce\", \"bmuf\" (block momentum) or \"ps\" (parameter "
       "server); \"auto\" (also for codec): measured and chosen at start (train/auto_config.h)"},
      {"sync.bucket_kib", ConfigType::kInt, "4096",
       "gradient bucket size in KiB (0 = one bucket; \"auto\": chosen at start)"},
      {"sync.overlap", ConfigType::kBool, "auto",
       "combine buckets on a communication thread while backward goes on (true), on the "
       "compute thread as each is ready (\"inline\"), or after backward (false); auto: the "
       "thread when each worker on the host has a spare core for it, else inline "
       "(sync/overlap_policy.h)"},
      {"sync.shard_optimizer", ConfigType::kBool, "true",
       "reduce-scatter, update own block, all-gather (else allreduce + full update; off with "
       "a codec)"},
      {"sync.momentum_correction", ConfigType::kBool, "auto",
       "each worker sends its own velocity through the codec and the sum is applied without "
       "momentum (DGC); auto: on for " +
           listed(names_of(&compress::CodecKind::momentum_correction), "and") +
           " under SGD with momentum (host memory)"},
      {"sync.momentum_masking", ConfigType::kBool, "false",
       listed(names_of(&compress::CodecKind::momentum_masking), "and") +
           " with momentum correction: clear velocity entries the codec sent in full (DGC)"},
      {"bmuf.tau", ConfigType::kInt, "8", "bmuf: local steps per block (>= 1)"},
      {"bmuf.eta", ConfigType::kDouble, "1 - 1/N", "bmuf: block momentum in [0, 1)"},
      {"bmuf.zeta", ConfigType::kDouble, "1", "bmuf: block learning rate in (0, 100]"},
      {"bmuf.nesterov", ConfigType::kBool, "true", "bmuf: start each block at W - eta V"},
      {"bmuf.reset_momentum", ConfigType::kBool, "false",
       "bmuf: zero the local optimizer's momentum after each block"},
  };
  for (auto& k : compress::codec_config_keys()) keys.push_back(k);
  // The allreduce strategy's codec options (read here, not by the codec registry).
  for (auto& k : std::vector<ConfigKeySpec>{
           {"codec.warmup_steps", ConfigType::kInt, warmup_defaults(),
            "sum exactly (fp32) for this many steps before the codec starts; with optim.name = "
            "\"onebit_adam\" its Adam stage before the variance freezes (15% of the run)"},
           {"codec.aggregation", ConfigType::kString, "\"auto\"",
            listed(striped_lossy_codecs(), "and") +
                ": \"stripes\" (owners re-encode their stripe's sum) or \"gather\" (every "
                "encoding to every rank); auto: gather for " +
                listed(names_of(&compress::CodecKind::gather_at_two_ranks), "and") +
                " at 2 workers"},
           {"codec.min_bucket_kib", ConfigType::kInt, min_bucket_defaults(),
            "buckets smaller than this skip the codec and are summed exactly (fp32)"},
       })
    keys.push_back(k);
  for (auto& k : sync::ps_config_keys()) keys.push_back(k);
  for (auto& k : sync::parallel_config_keys()) keys.push_back(k);
  // The algorithm of the allreduce strategy's (and bmuf's) allreduce, read by the communicator.
  for (auto& k : comm::comm_algorithm_config_keys()) keys.push_back(k);
  return keys;
}

void check_device_sync(const Config& cfg) {
  const std::string kind = read_sync_kind(cfg);
  if (kind != "allreduce")
    throw ConfigError(fmt::format(
        "{}: key 'sync': the nccl transport (device buffers) runs sync = \"allreduce\" only, "
        "not \"{}\"",
        cfg.where("sync"), kind));
  if (read_parallel_options(cfg).mode != "data")
    throw ConfigError(
        fmt::format("{}: the nccl transport (device buffers) runs data parallelism only "
                    "(parallel = \"data\")",
                    cfg.where(cfg.has("parallel.mode") ? "parallel.mode" : "parallel")));
  const std::string codec = codec_name(cfg);
  if (compress::codec_kind(codec).lossy && !compress::device_codec_built(codec)) {
    const std::string key = codec_key(cfg);
    throw ConfigError(
        fmt::format("{}: key '{}': codec {} has no device kernels; the nccl transport takes {}",
                    cfg.where(key), key, codec,
                    listed(compress::codec_names_where([](const compress::CodecKind& k) {
                             return !k.lossy || compress::device_codec_built(k.name);
                           }),
                           "or")));
  }
}

std::unique_ptr<Strategy> make_strategy(const Config& cfg, comm::Communicator& comm,
                                        nn::Model& model, optim::Optimizer& optimizer,
                                        int64_t total_steps) {
  if (comm.device_memory()) check_device_sync(cfg);
  const std::string kind = read_sync_kind(cfg);
  // Clipping needs the combined gradient of a step before its update, which only the
  // allreduce strategy holds: block momentum takes local steps on each worker's own gradient,
  // the parameter server combines on its servers (asynchronously with staleness), and model
  // parallelism updates each rank's slices during backward.
  const float clip_norm = read_clip_norm(cfg);
  if (clip_norm > 0.0f) {
    const char* why = model_parallel_block_index(model) >= 0
                          ? "parallel = \"model\"/\"hybrid\" updates its slices during backward"
                      : kind == "bmuf"
                          ? "sync = \"bmuf\" takes local steps on each worker's gradient"
                      : kind == "ps" ? "sync = \"ps\" combines gradients on the servers"
                                     : nullptr;
    if (why)
      throw ConfigError(fmt::format(
          "{}: key 'optim.clip_norm': clipping takes the norm of the combined gradient, which "
          "only sync = \"allreduce\" over data parallelism holds; {}",
          cfg.where("optim.clip_norm"), why));
  }
  const bool model_parallel = model_parallel_block_index(model) >= 0;
  if (!chosen_by_auto(cfg, "sync")) refuse_other_strategy_keys(cfg, kind, model_parallel);
  const bool onebit_adam = read_optimizer_options(cfg).name == "onebit_adam";
  if (onebit_adam) check_onebit_adam(cfg, kind, model_parallel, clip_norm);
  if (kind != "allreduce")
    refuse_allreduce_codec_keys(
        cfg, fmt::format("applies to sync = \"allreduce\", not to sync = \"{}\"", kind));
  if (model_parallel) {  // parallel = "model" | "hybrid", N > 1
    refuse_allreduce_codec_keys(
        cfg, "applies to data parallelism by allreduce, not to parallel = \"model\"/\"hybrid\"");
    if (kind != "allreduce")
      throw ConfigError(
          fmt::format("{}: key 'sync': parallel = \"model\"/\"hybrid\" runs its "
                      "data-parallel layers by allreduce; sync = \"{}\" is not "
                      "supported with it",
                      cfg.where("sync"), kind));
    return std::make_unique<ModelParallelStrategy>(comm, model, optimizer, codec_from_config(cfg));
  }
  if (kind == "ps") return sync::make_ps_strategy(read_ps_options(cfg), comm, model);
  const int64_t bucket_bytes = read_bucket_kib(cfg) << 10;
  if (kind == "bmuf") {
    BmufOptions opts;
    opts.tau = cfg.get_int("bmuf.tau", 8, 1, int64_t(1) << 30);
    if (cfg.has("bmuf.eta")) {
      opts.eta = cfg.get_double("bmuf.eta", 0.0);
      if (!(opts.eta >= 0.0 && opts.eta < 1.0))
        throw ConfigError(fmt::format("{}: key 'bmuf.eta': {} is out of range [0, 1)",
                                      cfg.where("bmuf.eta"), opts.eta));
    }
    opts.zeta = cfg.get_double("bmuf.zeta", 1.0);
    if (!(opts.zeta > 0.0 && opts.zeta <= 100.0))
      throw ConfigError(fmt::format("{}: key 'bmuf.zeta': {} is out of range (0, 100]",
                                    cfg.where("bmuf.zeta"), opts.zeta));
    opts.nesterov = cfg.get_bool("bmuf.nesterov", true);
    opts.reset_momentum = cfg.get_bool("bmuf.reset_momentum", false);
    opts.chunk_bytes = bucket_bytes;
    opts.codec = codec_from_config(cfg);
    return std::make_unique<BmufStrategy>(comm, model, optimizer, std::move(opts));
  }
  AllreduceOptions opts;
  opts.bucket_bytes = bucket_bytes;
  opts.combine = overlap_from_config(cfg, comm)           ? CombineWhere::kThread
                 : inline_combine_from_config(cfg, false) ? CombineWhere::kInline
                                                          : CombineWhere::kAfterBackward;
  opts.shard_optimizer = cfg.get_bool("sync.shard_optimizer", true);
  opts.codec = codec_from_config(cfg, onebit_adam ? "onebit" : "fp32");
  read_allreduce_codec_options(cfg, comm, total_steps, opts);
  opts.clip_norm = clip_norm;
  if (clip_norm > 0.0f && opts.momentum_correction > 0.0f) {
    // Momentum correction sends and applies velocities, not gradients, so there is no
    // combined gradient to clip: "auto" turns it off, an explicit true is refused.
    if (bool_or_auto(cfg, "sync.momentum_correction") == true)
      throw ConfigError(fmt::format(
          "{}: key 'optim.clip_norm': not with sync.momentum_correction, which sends and "
          "applies velocities, not gradients",
          cfg.where("optim.clip_norm")));
    opts.momentum_correction = 0.0f;
    opts.sgd_weight_decay = 0.0f;
  }
  return std::make_unique<AllreduceStrategy>(comm, model, optimizer, std::move(opts));
}

}  // namespace loom::plan
