// The one-pass kernel of the float collectives over shared memory (the thread transport's
// buffers, the MPI transport's node window): for every element of a
// range, the sum over n source buffers in rank order (((s0 + s1) + s2) + ...), stored to m
// destination buffers, all in registers: each source is read once and each destination
// written once, with no staging copy. That is the least memory traffic an in-place allreduce
// over shared buffers can have (2 reads + 2 writes per element for two ranks), so the
// collective runs at the cores' load/store bandwidth out of the cache or memory.
#pragma once

#include <cstddef>

#include "loom/comm/communicator.h"

namespace loom::comm {

// dst[d][i] = src[0][i] + src[1][i] + ... + src[n-1][i] (summed left to right) for i in
// [begin, end) and every d < m. Destinations may be sources (in place).
void sum_to_all_f32(const float* const* src, int n, float* const* dst, int m, size_t begin,
                    size_t end);

// The same for any reducer, on elements [begin, end) of red.elem_size bytes, in the same rank
// order: a tile at a time through this thread's comm::scratch (8 KiB, which stays in L1),
// acc = src[0], then acc (op)= src[1], ..., src[n-1], then acc to every dst. Float sums
// (red.sum_f32_kind) go through sum_to_all_f32 instead, which needs no staging copy.
void reduce_to_all(const std::byte* const* src, int n, std::byte* const* dst, int m, size_t begin,
                   size_t end, const Reducer& red);

}  // namespace loom::comm
