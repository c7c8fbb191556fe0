#include "loom/comm/comm_options.h"

namespace loom::comm {

std::vector<ConfigKeySpec> comm_algorithm_config_keys() {
  return {
      {"comm.algorithm", ConfigType::kString, "\"auto\"",
       "allreduce: \"ring\", \"halving-doubling\", \"two-level\" (reduce-scatter inside each "
       "machine, allreduce across, allgather inside; the flat path on one machine) or \"auto\" "
       "(two-level when ranks span machines with the same number > 1 on each, for buffers >= "
       "comm.small_kib; else the transport's own)"},
      {"comm.ranks_per_node", ConfigType::kInt, "0",
       "fake machines of this many consecutive ranks (tests, the thread transport); 0: as the "
       "transport finds them (mpi: ranks that share memory)"},
  };
}

}  // namespace loom::comm
