// Reads the comm.* keys of a run's config into CommOptions (communicator.h), once, at the edge.
#pragma once

#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"

namespace loom::comm {

// comm.timeout_s (default 30, > 0), comm.ring_chunk_kib (default 512), comm.small_kib
// (default 64): ConfigError naming the key when out of range; comm.node_shm (default true);
// comm.algorithm (auto, ring, halving-doubling, two-level; default auto) and
// comm.ranks_per_node (default 0: the machines as the transport finds them; > 0 fakes them).
CommOptions comm_options_from_config(const Config& config);

// The keys of the allreduce's algorithm choice (comm.algorithm, comm.ranks_per_node), for
// `loom train --help-config` and the check of unknown keys.
std::vector<ConfigKeySpec> comm_algorithm_config_keys();

}  // namespace loom::comm
