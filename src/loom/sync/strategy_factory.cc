#include "loom/core/error.h"
#include "loom/sync/allreduce_strategy.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

std::vector<ConfigKeySpec> sync_config_keys() {
  return {
      {"sync", ConfigType::kString, "\"allreduce\"", "how replicas agree: \"allreduce\""},
      {"sync.bucket_kib", ConfigType::kInt, "4096", "gradient bucket size in KiB (0 = one bucket)"},
      {"sync.overlap", ConfigType::kBool, "true", "combine buckets while backward goes on"},
      {"sync.shard_optimizer", ConfigType::kBool, "true",
       "reduce-scatter, update own block, all-gather (else allreduce + full update)"},
  };
}

std::unique_ptr<Strategy> make_strategy(const Config& cfg, comm::Communicator& comm,
                                        nn::Model& model, optim::Optimizer& optimizer) {
  const std::string kind = cfg.get_choice("sync", "allreduce", {"allreduce"});
  (void)kind;
  AllreduceOptions opts;
  opts.bucket_bytes = cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30) << 10;
  opts.overlap = cfg.get_bool("sync.overlap", true);
  opts.shard_optimizer = cfg.get_bool("sync.shard_optimizer", true);
  return std::make_unique<AllreduceStrategy>(comm, model, optimizer, opts);
}

}  // namespace loom::sync
