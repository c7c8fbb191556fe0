// The value types of configuration, without the configuration itself: a scalar, a value with
// where it was set, a key's declaration (type, default, doc) and their TOML text. Units that
// declare keys or carry values read at the edge use these; only the edge reads a Config
// (core/config.h), the bag the values come from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace loom {

using ConfigScalar = std::variant<bool, int64_t, double, std::string>;

struct ConfigValue {
  ConfigScalar value;
  std::vector<ConfigScalar> array;  // set when is_array
  bool is_array = false;
  std::string where;  // "file.toml:12" or "--set"
};

enum class ConfigType { kBool, kInt, kDouble, kString, kArray };

struct ConfigKeySpec {
  std::string key;
  ConfigType type;
  std::string default_text;  // as shown in `loom train --help-config`
  std::string doc;
};

// TOML text flattened into dotted keys ("optim.lr", "layer.0.type" for an array of tables), each
// value with its "name:line": what Config::from_string holds, for a unit that reads a TOML file
// of its own format (a graph file) without a run's config. ConfigError naming the line for bad
// syntax.
std::map<std::string, ConfigValue> toml_values(const std::string& text, const std::string& name);

// A value as TOML text that parses back to the same value and type: strings quoted and escaped,
// doubles in their shortest round-trip form with a ".0" when integral.
std::string config_scalar_text(const ConfigScalar& v);
// A scalar or an array of them as TOML text, the same way.
std::string config_value_text(const ConfigValue& v);
// A TOML basic string holding `s` (quotes, backslashes and control characters escaped).
std::string toml_quoted(const std::string& s);
// A dotted key as TOML: parts that are not bare ([A-Za-z0-9_-]+) quoted.
std::string toml_key(const std::string& dotted);
// Levenshtein distance, for "did you mean" hints on keys and names.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace loom
