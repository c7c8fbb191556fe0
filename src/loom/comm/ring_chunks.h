// Block and chunk arithmetic shared by the ring algorithms: block b (taken modulo n) is
// block_range(count, n, b); each block travels in chunks of options().ring_chunk_bytes.
// Sender and receiver compute the same chunks, so their messages match one to one.
#pragma once

#include <algorithm>

#include "loom/comm/communicator.h"

namespace loom::comm {

struct RingChunks {
  RingChunks(const Communicator& c, size_t count_, size_t elem_size)
      : n(c.size()),
        left((c.rank() + c.size() - 1) % c.size()),
        right((c.rank() + 1) % c.size()),
        count(count_),
        chunk_elems(std::max<size_t>(1, c.options().ring_chunk_bytes / elem_size)),
        max_block(block_range(count_, c.size(), 0).size()) {}

  BlockRange block(int b) const { return block_range(count, n, ((b % n) + n) % n); }
  size_t chunks(const BlockRange& b) const { return (b.size() + chunk_elems - 1) / chunk_elems; }
  BlockRange chunk(const BlockRange& b, size_t j) const {
    const size_t begin = b.begin + j * chunk_elems;
    return {begin, std::min(b.end, begin + chunk_elems)};
  }

  int n, left, right;
  size_t count, chunk_elems, max_block;
};

}  // namespace loom::comm
