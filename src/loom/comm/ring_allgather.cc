// Ring allgather, chunked and pipelined (see algorithms.h).
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/ring_chunks.h"

namespace loom::comm::algo {

void ring_allgather(Communicator& c, void* data, size_t count, size_t es) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  if (n == 1 || count == 0) return;
  const RingChunks ring(c, count, es);
  std::byte* base = static_cast<std::byte*>(data);
  // Every step receives into a different block of `data`, so all receives go up front.
  std::vector<std::vector<Request>> recvs(static_cast<size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    const BlockRange b = ring.block(r - s - 1);
    for (size_t j = 0; j < ring.chunks(b); ++j) {
      const BlockRange ch = ring.chunk(b, j);
      recvs[size_t(s)].push_back(c.irecv(ring.left, base + ch.begin * es, ch.size() * es, tag));
    }
  }
  std::vector<Request> sends;
  const BlockRange own = ring.block(r);
  for (size_t j = 0; j < ring.chunks(own); ++j) {
    const BlockRange ch = ring.chunk(own, j);
    sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
  }
  for (int s = 0; s < n - 1; ++s) {
    const BlockRange b = ring.block(r - s - 1);
    auto& rv = recvs[size_t(s)];
    for (size_t j = 0; j < rv.size(); ++j) {
      c.wait(rv[j]);
      if (s + 1 < n - 1) {  // forward the chunk the moment it lands
        const BlockRange ch = ring.chunk(b, j);
        sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
      }
    }
  }
  c.wait_all(sends);
}

}  // namespace loom::comm::algo
