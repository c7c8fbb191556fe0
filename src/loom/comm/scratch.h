// Per-thread scratch memory for the collective algorithms. Each worker is one thread, so a
// thread-local buffer that only grows avoids allocating (and page-faulting) on every call.
#pragma once

#include <cstddef>

namespace loom::comm {

// At least `bytes` of scratch, valid until the next call on this thread with a larger `slot`
// use. Two slots so an algorithm can hold two buffers at once.
void* scratch(size_t bytes, int slot = 0);

}  // namespace loom::comm
