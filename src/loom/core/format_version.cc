#include "loom/core/format_version.h"

#include <nlohmann/json.hpp>

#include "loom/core/error.h"

namespace loom {

int64_t check_format_version(const nlohmann::json& j, int64_t newest, const std::string& what,
                             const std::string& where) {
  if (!j.is_object()) return 0;
  const auto it = j.find(kFormatVersionKey);
  if (it == j.end()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    throw InputError(fmt::format("{}: {} '{}' must be a whole number >= 0, got {}", where, what,
                                 kFormatVersionKey, it->dump()));
  const int64_t v = it->get<int64_t>();
  if (v > newest)
    throw InputError(
        fmt::format("{}: {} format version {}; this build reads version {} or older (the file "
                    "was written by a newer loom)",
                    where, what, v, newest));
  return v;
}

}  // namespace loom
