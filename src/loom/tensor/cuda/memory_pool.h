// A caching allocator for device memory. cudaMalloc/cudaFree synchronise the device and cost
// tens of microseconds, far more than a training step's small buffers can afford, so freed
// blocks are kept in a free list by size and handed out again.
//
// Ordering: blocks are reused in the order of the backend's compute stream, where every op
// runs, so a block freed by the host while a kernel still reads it is only handed to work
// queued after that kernel. A buffer used on another stream (communication) must be finished
// (synchronize, or an event) before it is freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace loom::cuda {

struct PoolStats {
  size_t live_bytes = 0;    // handed out, not yet returned
  size_t cached_bytes = 0;  // returned, kept for reuse
  size_t peak_bytes = 0;    // high-water mark of live + cached
  int64_t hits = 0;         // allocations served from the cache
  int64_t misses = 0;       // allocations that called cudaMalloc
};

class MemoryPool {
 public:
  explicit MemoryPool(int device) : device_(device) {}
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // At least `bytes` (rounded to a size class), 256-byte aligned; not zeroed.
  void* allocate(size_t bytes);
  void deallocate(void* p);
  // Returns every cached block to the driver (called before giving up on an allocation).
  void release_cached();
  PoolStats stats() const;

  // Size classes: multiples of 512 B up to 1 MiB, then of 2 MiB, so a grown buffer of a
  // slightly different size still finds its predecessor's block.
  static size_t size_class(size_t bytes);

 private:
  void release_cached_locked();

  int device_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;       // size class -> cached block
  std::unordered_map<void*, size_t> live_;  // block -> size class
  PoolStats stats_;
};

}  // namespace loom::cuda
