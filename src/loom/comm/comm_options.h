// The comm.* keys a run's config may set, declared for `loom train --help-config` and the check
// of unknown keys; plan/comm_reader.h reads them into CommOptions (communicator.h).
#pragma once

#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config_value.h"

namespace loom::comm {

// The keys of the allreduce's algorithm choice (comm.algorithm, comm.ranks_per_node).
std::vector<ConfigKeySpec> comm_algorithm_config_keys();

}  // namespace loom::comm
