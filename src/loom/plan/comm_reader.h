// The comm.* keys of a run's config read into comm::CommOptions (comm/communicator.h).
#pragma once

#include "loom/comm/communicator.h"
#include "loom/core/config.h"

namespace loom::plan {

// comm.timeout_s (default 30, > 0), comm.ring_chunk_kib (default 512), comm.small_kib
// (default 64): ConfigError naming the key when out of range; comm.node_shm (default true);
// comm.algorithm (auto, ring, halving-doubling, two-level; default auto) and
// comm.ranks_per_node (default 0: the machines as the transport finds them; > 0 fakes them).
comm::CommOptions read_comm_options(const Config& config);

}  // namespace loom::plan
