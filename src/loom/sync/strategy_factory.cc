#include "loom/compress/device_codec_registry.h"
#include "loom/compress/device_codec.h"
#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/bmuf_strategy.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/model_parallel/model_parallel_strategy.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/sync/ps/ps_options.h"
#include "loom/sync/ps/ps_placement.h"
#include "loom/sync/strategy.h"

namespace loom::sync {
namespace {

// The codec the config names; nullptr for "fp32", which takes the plain collectives (they
// are exact, and the allreduce strategy can then shard the optimizer).
std::shared_ptr<const compress::Codec> codec_from_config(const Config& cfg) {
  std::unique_ptr<compress::Codec> codec = compress::make_codec(cfg, "fp32");
  if (codec->name() == "fp32") return nullptr;
  return std::shared_ptr<const compress::Codec>(std::move(codec));
}

}  // namespace

std::vector<ConfigKeySpec> sync_config_keys() {
  std::vector<ConfigKeySpec> keys = {
      {"sync", ConfigType::kString, "\"allreduce\"",
       "how replicas agree: \"allreduce\", \"bmuf\" (block momentum) or \"ps\" (parameter "
       "server)"},
      {"sync.bucket_kib", ConfigType::kInt, "4096", "gradient bucket size in KiB (0 = one bucket)"},
      {"sync.overlap", ConfigType::kBool, "auto",
       "combine buckets on a communication thread while backward goes on (true), on the "
       "compute thread as each is ready (\"inline\"), or after backward (false); auto: the "
       "thread when each worker on the host has a spare core for it, else inline "
       "(sync/overlap_policy.h)"},
      {"sync.shard_optimizer", ConfigType::kBool, "true",
       "reduce-scatter, update own block, all-gather (else allreduce + full update; off with "
       "a codec)"},
      {"sync.momentum_correction", ConfigType::kBool, "false",
       "with codec = \"topk\": each worker sends its own velocity and the sum is applied "
       "without momentum (DGC, Lin et al. 2018)"},
      {"bmuf.tau", ConfigType::kInt, "8", "bmuf: local steps per block (>= 1)"},
      {"bmuf.eta", ConfigType::kDouble, "1 - 1/N", "bmuf: block momentum in [0, 1)"},
      {"bmuf.zeta", ConfigType::kDouble, "1", "bmuf: block learning rate in (0, 100]"},
      {"bmuf.nesterov", ConfigType::kBool, "true", "bmuf: start each block at W - eta V"},
      {"bmuf.reset_momentum", ConfigType::kBool, "true",
       "bmuf: zero the local optimizer's momentum after each block"},
  };
  for (auto& k : compress::codec_config_keys()) keys.push_back(k);
  for (auto& k : ps_config_keys()) keys.push_back(k);
  for (auto& k : parallel_config_keys()) keys.push_back(k);
  return keys;
}

void check_device_sync(const Config& cfg) {
  const std::string kind = cfg.get_choice("sync", "allreduce", {"allreduce", "bmuf", "ps"});
  if (kind != "allreduce")
    throw ConfigError(fmt::format(
        "{}: key 'sync': the nccl transport (device buffers) runs sync = \"allreduce\" only, "
        "not \"{}\"",
        cfg.where("sync"), kind));
  if (parallel_options(cfg).mode != "data")
    throw ConfigError(
        fmt::format("{}: the nccl transport (device buffers) runs data parallelism only "
                    "(parallel = \"data\")",
                    cfg.where(cfg.has("parallel.mode") ? "parallel.mode" : "parallel")));
  const std::string codec = compress::codec_name(cfg);
  if (codec != "fp32" && !compress::device_codec_built(codec)) {
    const char* key = cfg.has("codec") ? "codec" : "codec.name";
    throw ConfigError(
        fmt::format("{}: key '{}': codec {} has no device kernels; the nccl transport takes "
                    "fp32, fp16, bf16, int8, onebit or topk",
                    cfg.where(key), key, codec));
  }
}

std::unique_ptr<Strategy> make_strategy(const Config& cfg, comm::Communicator& comm,
                                        nn::Model& model, optim::Optimizer& optimizer) {
  if (comm.device_memory()) check_device_sync(cfg);
  const std::string kind = cfg.get_choice("sync", "allreduce", {"allreduce", "bmuf", "ps"});
  // Clipping needs the combined gradient of a step before its update, which only the
  // allreduce strategy holds: block momentum takes local steps on each worker's own gradient,
  // the parameter server combines on its servers (asynchronously with staleness), and model
  // parallelism updates each rank's slices during backward.
  const float clip_norm = optim::clip_norm_from_config(cfg);
  if (clip_norm > 0.0f) {
    const char* why = model_parallel_block_index(model) >= 0
                          ? "parallel = \"model\"/\"hybrid\" updates its slices during backward"
                      : kind == "bmuf" ? "sync = \"bmuf\" takes local steps on each worker's gradient"
                      : kind == "ps"   ? "sync = \"ps\" combines gradients on the servers"
                                       : nullptr;
    if (why)
      throw ConfigError(fmt::format(
          "{}: key 'optim.clip_norm': clipping takes the norm of the combined gradient, which "
          "only sync = \"allreduce\" over data parallelism holds; {}",
          cfg.where("optim.clip_norm"), why));
    if (cfg.get_bool("sync.momentum_correction", false))
      throw ConfigError(fmt::format(
          "{}: key 'optim.clip_norm': not with sync.momentum_correction, which sends and "
          "applies velocities, not gradients",
          cfg.where("optim.clip_norm")));
  }
  if (model_parallel_block_index(model) >= 0) {  // parallel = "model" | "hybrid", N > 1
    if (kind != "allreduce")
      throw ConfigError(
          fmt::format("{}: key 'sync': parallel = \"model\"/\"hybrid\" runs its "
                      "data-parallel layers by allreduce; sync = \"{}\" is not "
                      "supported with it",
                      cfg.where("sync"), kind));
    return std::make_unique<ModelParallelStrategy>(comm, model, optimizer, codec_from_config(cfg));
  }
  if (kind == "ps") return make_ps_strategy(cfg, comm, model);
  const int64_t bucket_bytes = cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30) << 10;
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
    opts.reset_momentum = cfg.get_bool("bmuf.reset_momentum", true);
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
  opts.codec = codec_from_config(cfg);
  opts.clip_norm = clip_norm;
  if (cfg.get_bool("sync.momentum_correction", false)) {
    auto bad = [&](const std::string& why) {
      return ConfigError(fmt::format("{}: key 'sync.momentum_correction': {}",
                                     cfg.where("sync.momentum_correction"), why));
    };
    if (!opts.codec || opts.codec->aggregation() != compress::Aggregation::kGather)
      throw bad("needs codec = \"topk\" (a sparsifying codec)");
    if (cfg.get_string("optim.name", "sgd") != "sgd" || cfg.get_bool("optim.nesterov", false))
      throw bad("needs optim.name = \"sgd\" without Nesterov");
    opts.momentum_correction = float(cfg.get_double("optim.momentum", 0.9, 0.0, 0.999999));
    if (opts.momentum_correction == 0.0f) throw bad("needs optim.momentum > 0");
    opts.sgd_weight_decay = float(cfg.get_double("optim.weight_decay", 0.0, 0.0, 1.0));
  }
  return std::make_unique<AllreduceStrategy>(comm, model, optimizer, std::move(opts));
}

}  // namespace loom::sync
