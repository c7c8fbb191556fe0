#include "loom/sync/ps/ps_options.h"

#include <fmt/format.h>

#include "loom/compress/registry.h"
#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/plan/codec_reader.h"
#include "loom/sync/allreduce/overlap_policy.h"

namespace loom::sync {

std::vector<ConfigKeySpec> ps_config_keys() {
  return {
      {"ps.servers", ConfigType::kInt, "1", "parameter-server shards (contiguous key ranges)"},
      {"ps.staleness", ConfigType::kInt, "0",
       "steps a worker may run ahead of the slowest (0 = synchronous)"},
      {"ps.placement", ConfigType::kString, "\"threads\"",
       "\"threads\" (server threads in-process) or \"ranks\" (the last ps.servers ranks)"},
      {"ps.exact_delay", ConfigType::kBool, "false",
       "staleness k: always compute on the version k steps old (deterministic), not the newest"},
      {"ps.lookahead", ConfigType::kBool, "true",
       "staleness k: compute on the stale version extrapolated along the momentum to the "
       "version the gradient is applied to (off: on the stale version as it is)"},
      {"ps.stale_lr", ConfigType::kString, "\"none\"",
       "staleness k: \"divide\" the learning rate by k (staleness-aware) or \"none\""},
  };
}

PsOptions read_ps_options(const Config& cfg) {
  // Workers push gradients and pull parameters in fp32: a lossy codec would be ignored without
  // a word, and config.toml would record a codec the run never used. ("auto" is auto's to
  // decide; it does not weigh the parameter server.)
  const std::string key = plan::codec_key(cfg);
  const std::string codec = cfg.get_string(key, "fp32");
  if (codec != "auto" && compress::codec_kind(codec, cfg.where(key)).lossy)
    throw ConfigError(fmt::format(
        "{}: key '{}': codec {} does not apply to sync = \"ps\" ({}): the parameter server "
        "pushes gradients and pulls parameters in fp32; compress with sync = \"allreduce\" or "
        "\"bmuf\", or leave the codec fp32",
        cfg.where(key), key, codec, cfg.where("sync")));
  if (codec != "auto") plan::refuse_other_codec_keys(cfg, codec);
  PsOptions o;
  o.servers = int(cfg.get_int("ps.servers", 1, 1, 4096));
  o.staleness = int(cfg.get_int("ps.staleness", 0, 0, 1000));
  o.placement = cfg.get_choice("ps.placement", "threads", {"threads", "ranks"}) == "ranks"
                    ? PsPlacement::kRanks
                    : PsPlacement::kThreads;
  o.exact_delay = cfg.get_bool("ps.exact_delay", false);
  o.bucket_bytes = cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30) << 10;
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
  if (cfg.get_string("optim.name", "sgd") == "sgd")
    o.momentum = float(cfg.get_double("optim.momentum", 0.9, 0.0, 0.999999));
  return o;
}

bool ps_on_ranks(const Config& cfg) {
  if (cfg.get_string("sync", "allreduce") != "ps") return false;
  return read_ps_options(cfg).placement == PsPlacement::kRanks;
}

}  // namespace loom::sync
