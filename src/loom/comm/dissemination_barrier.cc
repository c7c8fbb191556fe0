// Dissemination barrier (Hensgen, Finkel & Manber, 1988), see algorithms.h.
#include "loom/comm/algorithms.h"

namespace loom::comm::algo {

void dissemination_barrier(Communicator& c) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  for (int k = 1; k < n; k *= 2) {
    Request s = c.isend((r + k) % n, nullptr, 0, tag);
    Request q = c.irecv((r - k + n) % n, nullptr, 0, tag);
    c.wait(q);
    c.wait(s);
  }
}

}  // namespace loom::comm::algo
