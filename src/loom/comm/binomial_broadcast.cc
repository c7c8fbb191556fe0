// Binomial-tree broadcast (as in MPICH): the rank at relative position v receives from
// v - 2^k, where 2^k is v's lowest set bit, and sends to v + 2^j for every 2^j below that.
// Large buffers go in chunks, each forwarded as soon as it lands.
#include <algorithm>
#include <vector>

#include "loom/comm/algorithms.h"

namespace loom::comm::algo {

void binomial_broadcast(Communicator& c, void* data, size_t bytes, int root) {
  const int n = c.size(), r = c.rank();
  const int tag = c.next_collective_tag();
  if (n == 1 || bytes == 0) return;
  std::byte* base = static_cast<std::byte*>(data);
  const size_t chunk = std::max<size_t>(1, c.options().ring_chunk_bytes);
  const size_t nchunks = (bytes + chunk - 1) / chunk;
  const int v = (r - root + n) % n;
  int parent = -1;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      parent = (v - mask + root) % n;
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) children.push_back((v + mask + root) % n);
  }
  std::vector<Request> recvs, sends;
  if (parent >= 0) {
    for (size_t j = 0; j < nchunks; ++j) {
      const size_t off = j * chunk;
      recvs.push_back(c.irecv(parent, base + off, std::min(chunk, bytes - off), tag));
    }
  }
  for (size_t j = 0; j < nchunks; ++j) {
    const size_t off = j * chunk, len = std::min(chunk, bytes - off);
    if (parent >= 0) c.wait(recvs[j]);
    for (int child : children) sends.push_back(c.isend(child, base + off, len, tag));
  }
  c.wait_all(sends);
}

}  // namespace loom::comm::algo
