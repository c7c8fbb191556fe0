#include "loom/sync/ps/ps_options.h"

#include <fmt/format.h>

#include "loom/core/error.h"

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

}  // namespace loom::sync
