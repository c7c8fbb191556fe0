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
  return o;
}

}  // namespace loom::comm
