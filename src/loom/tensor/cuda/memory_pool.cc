#include "loom/tensor/cuda/memory_pool.h"

#include <fmt/format.h>

#include "loom/core/error.h"
#include "loom/tensor/cuda/cuda_check.h"

namespace loom::cuda {

size_t MemoryPool::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20, kSmallLimit = size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  if (bytes <= kSmallLimit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

MemoryPool::~MemoryPool() {
  std::lock_guard<std::mutex> lock(mu_);
  // A pool that never allocated holds nothing of its device's, which may not exist (a backend
  // whose constructor found no such device): no CUDA call for it.
  if (live_.empty() && free_.empty()) return;
  // No throwing from a destructor: errors (a device already lost) are dropped and cleared.
  LOOM_CUDA_IGNORE(cudaSetDevice(device_));
  // Live blocks at exit are leaks of the caller; free them too rather than abort in a destructor.
  for (auto& [p, size] : live_) LOOM_CUDA_IGNORE(cudaFree(p));
  for (auto& [size, p] : free_) LOOM_CUDA_IGNORE(cudaFree(p));
}

void* MemoryPool::allocate(size_t bytes) {
  const size_t want = size_class(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  // Best fit, but never more than twice the request, so a small buffer does not pin a big block.
  auto it = free_.lower_bound(want);
  if (it != free_.end() && it->first <= 2 * want) {
    void* p = it->second;
    live_[p] = it->first;
    stats_.cached_bytes -= it->first;
    stats_.live_bytes += it->first;
    free_.erase(it);
    ++stats_.hits;
    return p;
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, want);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error before retrying
    release_cached_locked();
    e = cudaMalloc(&p, want);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(fmt::format(
        "CUDA device {}: cannot allocate {} bytes ({}); pool holds {} live, {} cached bytes",
        device_, want, cudaGetErrorString(e), stats_.live_bytes, stats_.cached_bytes));
  }
  ++stats_.misses;
  live_[p] = want;
  stats_.live_bytes += want;
  if (stats_.live_bytes + stats_.cached_bytes > stats_.peak_bytes)
    stats_.peak_bytes = stats_.live_bytes + stats_.cached_bytes;
  return p;
}

void MemoryPool::deallocate(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  LOOM_CHECK(it != live_.end(), "CUDA pool: deallocate of {} which this pool did not allocate",
             fmt::ptr(p));
  free_.emplace(it->second, p);
  stats_.live_bytes -= it->second;
  stats_.cached_bytes += it->second;
  live_.erase(it);
}

void MemoryPool::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void MemoryPool::release_cached_locked() {
  // cudaFree waits for the device, so kernels still reading a cached block have finished.
  for (auto& [size, p] : free_) LOOM_CUDA_CHECK(cudaFree(p));
  free_.clear();
  stats_.cached_bytes = 0;
}

PoolStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace loom::cuda
