// Ring reduce-scatter, chunked and pipelined (see algorithms.h).
//
// Incoming chunks land in a few chunk-sized receive slots that are reused round-robin, not in
// a scratch copy of a whole block: the slots stay in the L2 cache between the receive and the
// reduction, so the working set of a rank is its buffer plus kSlots chunks (with a block-sized
// scratch, a 16 MiB allreduce on 2 ranks touched 48 MiB, more than the 32 MiB L3 here). At most
// kSlots receives are outstanding; the next is posted as soon as a slot has been reduced.
#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/ring_chunks.h"
#include "loom/comm/scratch.h"

namespace loom::comm::algo {

namespace {
constexpr size_t kSlots = 4;
}

void ring_reduce_scatter(Communicator& c, void* data, size_t count, const Reducer& red) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  if (n == 1 || count == 0) return;
  const RingChunks ring(c, count, red.elem_size);
  std::byte* base = static_cast<std::byte*>(data);
  const size_t es = red.elem_size;
  const size_t slot_bytes = std::min(ring.chunk_elems, ring.max_block) * es;
  std::byte* slots = static_cast<std::byte*>(scratch(kSlots * slot_bytes, 0));

  // Every chunk this rank receives, in order: step s reduces block r-s-2, chunk by chunk.
  struct Incoming {
    BlockRange range;
    bool forward;  // reduced chunks of all but the last step go on to the right
  };
  std::vector<Incoming> in;
  for (int s = 0; s < n - 1; ++s) {
    const BlockRange b = ring.block(r - s - 2);
    for (size_t j = 0; j < ring.chunks(b); ++j) in.push_back({ring.chunk(b, j), s + 1 < n - 1});
  }
  std::vector<Request> recvs(in.size());
  auto post_recv = [&](size_t k) {
    recvs[k] = c.irecv(ring.left, slots + (k % kSlots) * slot_bytes, in[k].range.size() * es, tag);
  };

  // Step 0 sends block r-1 as it is; later steps forward what they have just reduced.
  std::vector<Request> sends;
  const BlockRange first = ring.block(r - 1);
  for (size_t j = 0; j < ring.chunks(first); ++j) {
    const BlockRange ch = ring.chunk(first, j);
    sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
  }
  for (size_t k = 0; k < std::min(kSlots, in.size()); ++k) post_recv(k);
  for (size_t k = 0; k < in.size(); ++k) {
    c.wait(recvs[k]);
    const BlockRange& ch = in[k].range;
    red.fn(base + ch.begin * es, slots + (k % kSlots) * slot_bytes, ch.size());
    if (k + kSlots < in.size()) post_recv(k + kSlots);
    if (in[k].forward)
      sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag));
  }
  c.wait_all(sends);
}

}  // namespace loom::comm::algo
