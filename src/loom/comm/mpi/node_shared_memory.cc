#include "loom/comm/mpi/node_shared_memory.h"

#include <sys/statvfs.h>

#include <cstdlib>
#include <new>
#include <string>

#include "loom/core/log.h"

namespace loom::comm {

namespace {

// Open MPI backs a shared window with one file in osc_sm_backing_directory (/dev/shm unless the
// environment says otherwise). A window larger than the room there does not fail cleanly: Open
// MPI warns and the job hangs (seen with an 8 MiB tmpfs), and a container's default 64 MiB
// /dev/shm is of that order. So node rank 0 picks the largest half-region, from `wanted` down
// by fours to 1 MiB, whose window fits twice over (Open MPI's own shared-memory transport lives
// there too); 0 when none does.
size_t fitting_half_bytes(int ranks, size_t wanted) {
  const char* env = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  const std::string dir = env && *env ? env : "/dev/shm";
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) {
    log_info(
        "mpi transport: cannot stat {} (the shared window's backing directory): "
        "collectives go point to point",
        dir);
    return 0;
  }
  const double room = double(st.f_bavail) * double(st.f_frsize);
  for (size_t half = wanted; half >= (size_t(1) << 20); half /= 4) {
    const double window = double(ranks) * double(128 + 2 * half);
    if (2 * window <= room) return half;
  }
  log_info(
      "mpi transport: {} has {:.0f} bytes free, less than twice the smallest shared window "
      "({:.0f} bytes): collectives go point to point",
      dir, room, double(ranks) * double(128 + 2 * (size_t(1) << 20)));
  return 0;
}

}  // namespace

std::unique_ptr<NodeSharedMemory> NodeSharedMemory::create(MPI_Comm comm, size_t half_bytes) {
  int world = 1, rank = 0;
  MPI_Comm_size(comm, &world);
  MPI_Comm_rank(comm, &rank);
  if (world < 2) return nullptr;
  // Keyed by rank, so a rank's place on the node is its place in `comm`.
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return nullptr;
  int on_node = 0;
  MPI_Comm_size(node, &on_node);
  if (on_node != world) {  // the same answer on every rank: each sees fewer than all
    MPI_Comm_free(&node);
    return nullptr;
  }
  MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
  uint64_t half = rank == 0 ? uint64_t(fitting_half_bytes(world, half_bytes)) : 0;
  MPI_Bcast(&half, 1, MPI_UINT64_T, 0, node);  // one decision for all
  if (half == 0) {
    MPI_Comm_free(&node);
    return nullptr;
  }
  std::unique_ptr<NodeSharedMemory> m(new NodeSharedMemory());
  m->node_ = node;
  m->rank_ = rank;
  m->half_bytes_ = (size_t(half) + 63) / 64 * 64;
  // + 64: Open MPI places segments at no particular alignment (seen: 8 bytes past a line), and
  // the control line and the regions want cache lines of their own.
  const size_t segment = 64 + sizeof(Control) + 2 * m->half_bytes_;
  void* base = nullptr;
  int ok = MPI_Win_allocate_shared(MPI_Aint(segment), 1, MPI_INFO_NULL, node, &base, &m->win_) ==
           MPI_SUCCESS;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
  if (!all_ok) {
    m->abandon();  // freeing is collective, and not every rank has a window to free
    return nullptr;
  }
  m->control_.resize(size_t(world));
  m->regions_.resize(size_t(world));
  for (int q = 0; q < world; ++q) {
    MPI_Aint bytes = 0;
    int disp = 0;
    void* p = nullptr;
    MPI_Win_shared_query(m->win_, q, &bytes, &disp, &p);
    // Pages are mapped page-aligned in every process, so rounding up lands on the same byte.
    const uintptr_t at = (reinterpret_cast<uintptr_t>(p) + 63) / 64 * 64;
    std::byte* seg = reinterpret_cast<std::byte*>(at);
    m->control_[size_t(q)] = reinterpret_cast<Control*>(seg);
    m->regions_[size_t(q)] = seg + sizeof(Control);
  }
  new (m->control_[size_t(rank)]) Control();  // each rank starts its own line
  MPI_Barrier(node);
  return m;
}

NodeSharedMemory::~NodeSharedMemory() {
  if (abandoned_) return;
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

uint64_t NodeSharedMemory::arrive(size_t bytes) {
  Control& me = *control_[size_t(rank_)];
  me.bytes[half_].store(bytes, std::memory_order_relaxed);
  // Release: what this rank wrote to its region before arriving is visible to whoever sees
  // the new count.
  return me.arrivals.fetch_add(1, std::memory_order_acq_rel) + 1;
}

int NodeSharedMemory::first_behind(uint64_t target) const {
  for (size_t q = 0; q < control_.size(); ++q)
    if (control_[q]->arrivals.load(std::memory_order_acquire) < target) return int(q);
  return -1;
}

size_t NodeSharedMemory::bytes_of(int q) const {
  return size_t(control_[size_t(q)]->bytes[half_].load(std::memory_order_relaxed));
}

}  // namespace loom::comm
