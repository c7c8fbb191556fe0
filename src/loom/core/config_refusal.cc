#include "loom/core/config_refusal.h"

#include <variant>

#include "loom/core/error.h"

namespace loom {
namespace {

bool same_scalar(const ConfigScalar& a, const ConfigScalar& b) {
  const auto number = [](const ConfigScalar& v, double& out) {
    if (const int64_t* i = std::get_if<int64_t>(&v)) return out = double(*i), true;
    if (const double* d = std::get_if<double>(&v)) return out = *d, true;
    return false;
  };
  double x = 0, y = 0;
  if (number(a, x) && number(b, y)) return x == y;
  return a == b;
}

}  // namespace

bool sets_other_than(const Config& cfg, const std::string& key, const ConfigScalar& def) {
  const auto it = cfg.values().find(key);
  if (it == cfg.values().end()) return false;
  return it->second.is_array || !same_scalar(it->second.value, def);
}

bool sets_other_than(const Config& cfg, const std::string& key,
                     const std::vector<ConfigScalar>& def) {
  const auto it = cfg.values().find(key);
  if (it == cfg.values().end()) return false;
  const ConfigValue& v = it->second;
  // A single number is read as a list of one (Config::get_int_list).
  const std::vector<ConfigScalar> given = v.is_array ? v.array : std::vector<ConfigScalar>{v.value};
  if (given.size() != def.size()) return true;
  for (size_t i = 0; i < def.size(); ++i)
    if (!same_scalar(given[i], def[i])) return true;
  return false;
}

void refuse_key(const Config& cfg, const std::string& key, const std::string& why) {
  const auto it = cfg.values().find(key);
  const std::string value = it == cfg.values().end() ? "" : " = " + config_value_text(it->second);
  throw ConfigError(fmt::format("{}: key '{}'{}: {}", cfg.where(key), key, value, why));
}

void refuse_unless_default(const Config& cfg, const std::string& key, const ConfigScalar& def,
                           const std::string& why) {
  if (sets_other_than(cfg, key, def)) refuse_key(cfg, key, why);
}

}  // namespace loom
