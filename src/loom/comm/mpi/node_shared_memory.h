// Shared memory of MPI ranks that all run on one machine (an MPI-3 shared window,
// MPI_Win_allocate_shared), where the MPI transport's float collectives meet instead of
// passing messages. Through Open MPI's shared-memory transport each message is one
// process_vm_readv of the peer's pages (CMA), a kernel copy that pins pages and reaches
// ~12 GB/s at 1-4 MiB on the Zen 5 box; plain loads and stores on a shared mapping run at the
// cache's speed, as the thread transport's collectives do (docs/comm.md).
//
// Each rank owns one segment of the window: a control line (its barrier arrivals and the byte
// count it passed) and a data region in two halves. Collective k uses half k % 2, so a rank
// that has left collective k may fill the other half for k + 1 while slower ranks still read
// this one; it cannot reach k + 2 (this half again) before they have all arrived at k + 1's
// first barrier, that is, finished reading k.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::comm {

class NodeSharedMemory {
 public:
  // Collective over `comm`. Null when the ranks span more than one machine, when there is one
  // rank, or when the window cannot be had (the transport then keeps to point-to-point).
  // `half_bytes` is what one collective may move; less when the backing directory (/dev/shm)
  // has too little room for it (see fitting_half_bytes), nothing below 1 MiB.
  static std::unique_ptr<NodeSharedMemory> create(MPI_Comm comm, size_t half_bytes);
  ~NodeSharedMemory();
  NodeSharedMemory(const NodeSharedMemory&) = delete;
  NodeSharedMemory& operator=(const NodeSharedMemory&) = delete;

  // Bytes one collective may move through a region (one half).
  size_t capacity() const { return half_bytes_; }
  // Rank q's half for the collective now under way.
  std::byte* region(int q) const { return regions_[size_t(q)] + half_ * half_bytes_; }
  // Called once at the start of every collective that uses the window.
  void next_collective() { half_ ^= 1; }

  // Barrier, in two parts so the caller can wait its own way (timeouts, serving its control
  // channel): arrive() publishes `bytes` and returns the arrival count every rank must reach;
  // first_behind(target) is the lowest rank not there yet, -1 when all are.
  uint64_t arrive(size_t bytes);
  int first_behind(uint64_t target) const;
  // What rank q passed at its last arrival.
  size_t bytes_of(int q) const;

  // Leak the window instead of freeing it (MPI_Win_free is collective: not with a peer gone).
  void abandon() { abandoned_ = true; }

 private:
  struct alignas(64) Control {
    std::atomic<uint64_t> arrivals{0};
    // By half, like the regions: a rank that left a collective after its last barrier may
    // publish the next one's count while others still check this one's.
    std::atomic<uint64_t> bytes[2] = {0, 0};
  };
  static_assert(sizeof(Control) == 64, "one cache line per rank's control");

  NodeSharedMemory() = default;

  MPI_Win win_ = MPI_WIN_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;
  int rank_ = 0;
  size_t half_bytes_ = 0;
  int half_ = 1;  // next_collective() flips it to 0 first
  bool abandoned_ = false;
  std::vector<Control*> control_;
  std::vector<std::byte*> regions_;
};

}  // namespace loom::comm
