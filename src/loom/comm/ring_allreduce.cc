// Ring allreduce = ring reduce-scatter + ring allgather (Patarasuk & Yuan, JPDC 2009):
// bandwidth-optimal, each rank sends and receives 2(n-1)/n of the buffer.
#include "loom/comm/algorithms.h"

namespace loom::comm::algo {

void ring_allreduce(Communicator& c, void* data, size_t count, const Reducer& red) {
  ring_reduce_scatter(c, data, count, red);
  ring_allgather(c, data, count, red.elem_size);
}

}  // namespace loom::comm::algo
