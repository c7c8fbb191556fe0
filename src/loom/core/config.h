// Configuration: a TOML file flattened into dotted keys ("optim.lr"), plus `--set key=value`
// overrides. Every value remembers where it came from ("cfg.toml:12" or "--set"), so errors
// name the key and the line. Readers ask for typed values with a default and a range; the
// caller that knows all valid keys (the train layer) rejects unknown ones with check_known().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/config_value.h"

namespace loom {

class Config {
 public:
  Config() = default;
  // Throws ConfigError naming the file and line for TOML syntax errors; InputError if unreadable.
  static Config from_file(const std::string& path);
  static Config from_string(const std::string& text, const std::string& name = "<string>");

  // "key=value"; value parsed as a TOML value, or taken as a bare string if it is not one.
  void set_override(const std::string& assignment);
  void set(const std::string& key, ConfigScalar value, const std::string& where = "code");

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, ConfigValue>& values() const { return values_; }
  std::string where(const std::string& key) const;

  bool get_bool(const std::string& key, bool def) const;
  int64_t get_int(const std::string& key, int64_t def) const;
  int64_t get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi) const;
  double get_double(const std::string& key, double def) const;
  double get_double(const std::string& key, double def, double lo, double hi) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  // An array of integers (a single integer is taken as a list of one).
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& def) const;
  // One of `choices`, else ConfigError listing them.
  std::string get_choice(const std::string& key, const std::string& def,
                         const std::vector<std::string>& choices) const;

  // Every key present must be in `known` (exact, or under a prefix ending in '.'), else
  // ConfigError naming the key, its line and the closest known key.
  void check_known(const std::vector<ConfigKeySpec>& known) const;

  // Sorted "key = value" lines: the same config gives the same text on every rank, and the text
  // parses back (from_string) to the same keys, values and types.
  std::string canonical_text() const;

 private:
  const ConfigValue* find(const std::string& key) const;
  std::map<std::string, ConfigValue> values_;
};

}  // namespace loom
