// Refusing a key that the run's combination gives no meaning to (an Adam option under SGD, a
// schedule's parameter under another schedule, a block-momentum key with the parameter server).
// Ignoring such a key would let a run record in config.toml a setting it never used, so each
// unit that reads a key also refuses it, by name, where it does not apply. A key set to its
// default is let through: it asks for nothing the run fails to do, and a config that spells out
// defaults (configs/mlp.toml's momentum) still runs with another optimizer or model.
#pragma once

#include <string>
#include <vector>

#include "loom/core/config.h"

namespace loom {

// Whether `key` is set to something other than `def`, the value that leaves it out. Numbers
// compare by value (10 and 10.0 are the same); a value of another type than `def` differs.
bool sets_other_than(const Config& cfg, const std::string& key, const ConfigScalar& def);
// The same for an array key (mlp.hidden): set to anything but exactly these elements.
bool sets_other_than(const Config& cfg, const std::string& key,
                     const std::vector<ConfigScalar>& def);

// ConfigError "<where>: key '<key>' = <value>: <why>", where `why` says what the key applies to
// and what the run is instead.
[[noreturn]] void refuse_key(const Config& cfg, const std::string& key, const std::string& why);

// refuse_key when `key` is set to something other than `def`.
void refuse_unless_default(const Config& cfg, const std::string& key, const ConfigScalar& def,
                           const std::string& why);

}  // namespace loom
