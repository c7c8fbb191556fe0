// Ring allreduce = ring reduce-scatter + ring allgather (Patarasuk & Yuan, JPDC 2009):
// bandwidth-optimal, each rank sends and receives 2(n-1)/n of the buffer.
//
// The two phases run fused, chunk by chunk, rather than one after the other:
//  - the reduce-scatter receives into kSlots chunk-sized slots, each receive posted when a slot
//    frees, so a chunk is reduced while it is still in cache. Posting every receive at once
//    (ring_reduce_scatter) lets Open MPI's single-copy shared memory (CMA: the receiver's
//    progress copies each matched message) copy a whole block before the first chunk is
//    reduced; at 16 MiB on 2 ranks that cost 0.84-0.86x MPI_Allreduce against 1.16-1.23x
//    fused (docs/comm.md);
//  - a chunk of the rank's own block goes out as the allgather's first send as soon as its
//    last reduction is done, so the peer copies it while this rank reduces the next chunk;
//  - the allgather's receive of a chunk lands in the bytes the reduce-scatter sent that chunk
//    from, so it is posted once that send has completed (MPI forbids writing the buffer of a
//    pending send); both sides post these receives and sends in the same (step, chunk) order.
// Each block is reduced along the same chain as in ring_reduce_scatter (acc = own, in = left
// neighbour's partial sum), so every rank ends with the same bits as the unfused ring.
#include <algorithm>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/ring_chunks.h"
#include "loom/comm/scratch.h"

namespace loom::comm::algo {

namespace {
// Receive slots of the reduce-scatter: one being reduced, one filling. More (4) or smaller
// chunks (64-256 KiB) measured no better on 2 ranks: each extra message costs a rendezvous.
constexpr size_t kSlots = 2;
}  // namespace

void ring_allreduce(Communicator& c, void* data, size_t count, const Reducer& red) {
  const int n = c.size(), r = c.rank();
  const int tag_rs = c.next_collective_tag();
  const int tag_ag = c.next_collective_tag();
  if (n == 1 || count == 0) return;
  const RingChunks ring(c, count, red.elem_size);
  std::byte* base = static_cast<std::byte*>(data);
  const size_t es = red.elem_size;
  const int steps = n - 1;
  // Reduce-scatter step s sends block r-s-1 and receives block r-s-2; allgather step s sends
  // block r-s and receives block r-s-1. `items` lists the reduce-scatter's receives in order.
  struct Item {
    int s;
    size_t j;
  };
  std::vector<Item> items;
  for (int s = 0; s < steps; ++s) {
    for (size_t j = 0; j < ring.chunks(ring.block(r - s - 2)); ++j) items.push_back({s, j});
  }
  const size_t slot_bytes = std::min(ring.chunk_elems, ring.max_block) * es;
  std::byte* slots = static_cast<std::byte*>(scratch(kSlots * slot_bytes, 0));
  auto chunk_of = [&](int blk, size_t j) { return ring.chunk(ring.block(blk), j); };
  auto slot = [&](size_t k) { return slots + (k % kSlots) * slot_bytes; };

  std::vector<std::vector<Request>> rs_sends(static_cast<size_t>(steps));
  std::vector<std::vector<Request>> ag_recvs(static_cast<size_t>(steps));
  std::vector<Request> rs_recvs(items.size()), ag_sends;
  auto send_rs = [&](int s, size_t j) {
    const BlockRange ch = chunk_of(r - s - 1, j);
    rs_sends[size_t(s)].push_back(
        c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag_rs));
  };
  auto post_rs_recv = [&](size_t k) {
    const BlockRange ch = chunk_of(r - items[k].s - 2, items[k].j);
    rs_recvs[k] = c.irecv(ring.left, slot(k), ch.size() * es, tag_rs);
  };
  // The allgather's receive (s, j) reuses the bytes of the reduce-scatter's send (s, j).
  int ag_s = 0;
  size_t ag_j = 0;
  auto post_next_ag_recv = [&] {
    while (ag_s < steps && ag_j >= ring.chunks(ring.block(r - ag_s - 1))) ++ag_s, ag_j = 0;
    if (ag_s >= steps) return false;
    c.wait(rs_sends[size_t(ag_s)][ag_j]);
    const BlockRange ch = chunk_of(r - ag_s - 1, ag_j);
    ag_recvs[size_t(ag_s)].push_back(
        c.irecv(ring.left, base + ch.begin * es, ch.size() * es, tag_ag));
    ++ag_j;
    return true;
  };

  for (size_t j = 0; j < ring.chunks(ring.block(r - 1)); ++j) send_rs(0, j);
  for (size_t k = 0; k < std::min(kSlots, items.size()); ++k) post_rs_recv(k);
  for (size_t k = 0; k < items.size(); ++k) {
    const auto [s, j] = items[k];
    c.wait(rs_recvs[k]);
    const BlockRange ch = chunk_of(r - s - 2, j);
    red.fn(base + ch.begin * es, slot(k), ch.size());
    if (k + kSlots < items.size()) post_rs_recv(k + kSlots);
    if (s + 1 < steps) {
      send_rs(s + 1, j);  // forward the partial sum
    } else {              // block r's chunk j is final: the allgather's first send
      ag_sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag_ag));
      post_next_ag_recv();
    }
  }
  while (post_next_ag_recv()) {
  }
  for (int s = 0; s < steps; ++s) {
    for (size_t j = 0; j < ag_recvs[size_t(s)].size(); ++j) {
      c.wait(ag_recvs[size_t(s)][j]);
      if (s + 1 < steps) {  // forward the chunk the moment it lands
        const BlockRange ch = chunk_of(r - s - 1, j);
        ag_sends.push_back(c.isend(ring.right, base + ch.begin * es, ch.size() * es, tag_ag));
      }
    }
  }
  c.wait_all(ag_sends);
  for (auto& v : rs_sends) c.wait_all(v);
}

}  // namespace loom::comm::algo
