#include "loom/plan/comm_reader.h"

#include <string>
#include <vector>

namespace loom::plan {

comm::CommOptions read_comm_options(const Config& config) {
  comm::CommOptions o;
  o.timeout_s = config.get_double("comm.timeout_s", o.timeout_s, 1e-3, 1e6);
  o.ring_chunk_bytes =
      size_t(config.get_int("comm.ring_chunk_kib", int64_t(o.ring_chunk_bytes >> 10), 1, 1 << 20))
      << 10;
  o.small_message_bytes =
      size_t(config.get_int("comm.small_kib", int64_t(o.small_message_bytes >> 10), 0, 1 << 20))
      << 10;
  o.node_shared_memory = config.get_bool("comm.node_shm", o.node_shared_memory);
  const std::vector<std::string> names = comm::allreduce_algorithm_names();
  const std::string algorithm =
      config.get_choice("comm.algorithm", comm::allreduce_algorithm_name(o.algorithm), names);
  using comm::AllreduceAlgorithm;
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling,
        AllreduceAlgorithm::kTwoLevel}) {
    if (comm::allreduce_algorithm_name(a) == algorithm) o.algorithm = a;
  }
  o.ranks_per_node = int(config.get_int("comm.ranks_per_node", o.ranks_per_node, 0, 1 << 20));
  return o;
}

}  // namespace loom::plan
