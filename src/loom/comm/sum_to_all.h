// The one-pass kernel of the float collectives over shared memory (the thread transport's
// buffers, the MPI transport's node window): for every element of a
// range, the sum over n source buffers in rank order (((s0 + s1) + s2) + ...), stored to m
// destination buffers, all in registers: each source is read once and each destination
// written once, with no staging copy. That is the least memory traffic an in-place allreduce
// over shared buffers can have (2 reads + 2 writes per element for two ranks), so the
// collective runs at the cores' load/store bandwidth out of the cache or memory.
#pragma once

#include <cstddef>

namespace loom::comm {

// dst[d][i] = src[0][i] + src[1][i] + ... + src[n-1][i] (summed left to right) for i in
// [begin, end) and every d < m. Destinations may be sources (in place).
void sum_to_all_f32(const float* const* src, int n, float* const* dst, int m, size_t begin,
                    size_t end);

}  // namespace loom::comm
