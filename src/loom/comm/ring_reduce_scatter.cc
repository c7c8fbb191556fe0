// Ring reduce-scatter, chunked and pipelined (see algorithms.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/ring_chunks.h"
#include "loom/comm/scratch.h"

namespace loom::comm::algo {

void ring_reduce_scatter(Communicator& c, void* data, size_t count, const Reducer& red) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  if (n == 1 || count == 0) return;
  const RingChunks ring(c, count, red.elem_size);
  std::byte* base = static_cast<std::byte*>(data);
  const size_t es = red.elem_size;
  // Two receive buffers: the receives of step s+1 are posted while step s is reduced.
  std::byte* tmp[2] = {static_cast<std::byte*>(scratch(ring.max_block * es, 0)),
                       static_cast<std::byte*>(scratch(ring.max_block * es, 1))};
  std::vector<Request> sends;
  std::vector<Request> recvs[2];
  auto post_recvs = [&](int s) {
    const BlockRange b = ring.block(r - s - 2);
    auto& rv = recvs[s % 2];
    rv.clear();
    for (size_t j = 0; j < ring.chunks(b); ++j) {
      const BlockRange ch = ring.chunk(b, j);
      rv.push_back(c.irecv(ring.left, tmp[s % 2] + (ch.begin - b.begin) * es, ch.size() * es, tag));
    }
  };
  // Step 0 sends block r-1 as it is; later steps forward what they have just reduced.
  const BlockRange first = ring.block(r - 1);
  for (size_t j = 0; j < ring.chunks(first); ++j) {
    const BlockRange ch = ring.chunk(first, j);
    sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
  }
  post_recvs(0);
  for (int s = 0; s < n - 1; ++s) {
    if (s + 1 < n - 1) post_recvs(s + 1);
    const BlockRange b = ring.block(r - s - 2);
    auto& rv = recvs[s % 2];
    for (size_t j = 0; j < rv.size(); ++j) {
      c.wait(rv[j]);
      const BlockRange ch = ring.chunk(b, j);
      red.fn(base + ch.begin * es, tmp[s % 2] + (ch.begin - b.begin) * es, ch.size());
      if (s + 1 < n - 1)
        sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
    }
  }
  c.wait_all(sends);
}

}  // namespace loom::comm::algo
