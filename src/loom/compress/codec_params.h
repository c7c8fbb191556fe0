// The values of a codec's own keys (CodecKind::keys), read from the config at the edge
// (plan/codec_reader.h) and handed to the codec's maker as typed values, each with where it was
// set, so that a codec's own checks name the line.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "loom/core/config_value.h"

namespace loom::compress {

// One of a codec's own keys. Its default's type is the key's (int64_t or double); a value
// outside [lo, hi] is refused where the config is read, naming the key; checks a range cannot
// say (a power of two) are the maker's.
struct CodecKey {
  std::string key;
  ConfigScalar default_value;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  std::string doc;

  // As `--help-config` and Config::check_known take it.
  ConfigKeySpec spec() const;
};

// Every key a codec's record declares, set or at its default.
class CodecParams {
 public:
  void set(const std::string& key, ConfigScalar value, std::string where);
  // Error (a bug, not a user's mistake) for a key not set or of another type.
  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  // Where the value was set ("file.toml:12", "--set", a caller's name), or "default".
  const std::string& where(const std::string& key) const;

 private:
  struct Entry {
    ConfigScalar value;
    std::string where;
  };
  const Entry& at(const std::string& key) const;
  std::map<std::string, Entry> values_;
};

}  // namespace loom::compress
