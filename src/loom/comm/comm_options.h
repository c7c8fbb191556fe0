// Reads the comm.* keys of a run's config into CommOptions (communicator.h), once, at the edge.
#pragma once

#include "loom/comm/communicator.h"
#include "loom/core/config.h"

namespace loom::comm {

// comm.timeout_s (default 30, > 0), comm.ring_chunk_kib (default 512), comm.small_kib
// (default 64): ConfigError naming the key when out of range; comm.node_shm (default true).
CommOptions comm_options_from_config(const Config& config);

}  // namespace loom::comm
