#include "loom/comm/comm_options.h"

namespace loom::comm {

CommOptions comm_options_from_config(const Config& config) {
  CommOptions o;
  o.timeout_s = config.get_double("comm.timeout_s", o.timeout_s, 1e-3, 1e6);
  o.ring_chunk_bytes =
      size_t(config.get_int("comm.ring_chunk_kib", int64_t(o.ring_chunk_bytes >> 10), 1, 1 << 20))
      << 10;
  o.small_message_bytes =
      size_t(config.get_int("comm.small_kib", int64_t(o.small_message_bytes >> 10), 0, 1 << 20))
      << 10;
  o.node_shared_memory = config.get_bool("comm.node_shm", o.node_shared_memory);
  const std::vector<std::string> names = allreduce_algorithm_names();
  const std::string algorithm =
      config.get_choice("comm.algorithm", allreduce_algorithm_name(o.algorithm), names);
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling,
        AllreduceAlgorithm::kTwoLevel}) {
    if (allreduce_algorithm_name(a) == algorithm) o.algorithm = a;
  }
  o.ranks_per_node = int(config.get_int("comm.ranks_per_node", o.ranks_per_node, 0, 1 << 20));
  return o;
}

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
