#include "loom/sync/strategy.h"

#include <fmt/format.h>

namespace loom::sync {

std::string Strategy::restore_resharded(const std::vector<StrategyState>& ranks) {
  for (const StrategyState& st : ranks)
    if (!st.empty())
      throw ConfigError(fmt::format(
          "{}: its checkpointed state cannot be carried to another world size; resume on {} "
          "worker{}",
          describe(), ranks.size(), ranks.size() == 1 ? "" : "s"));
  return "";
}

}  // namespace loom::sync
