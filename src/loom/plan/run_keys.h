// The keys `loom train` accepts: its own, plus those each layer declares. Unknown keys are
// errors that name the key and its line.
#pragma once

#include <string>
#include <vector>

#include "loom/core/config_value.h"

namespace loom::plan {

std::vector<ConfigKeySpec> train_config_keys();
// "key  default  doc" lines for `loom train --help-config`.
std::string config_help();

}  // namespace loom::plan
