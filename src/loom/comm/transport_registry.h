// The one place that knows which transports were built. Everything else asks here:
//   auto world = loom::comm::create_world("auto", workers, loom::plan::read_comm_options(cfg));
// A transport that was not built is a ConfigError naming the build option (LOOM_MPI=ON); an
// unknown name is a ConfigError listing the known ones.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/comm/comm_options.h"
#include "loom/comm/communicator.h"
#include "loom/comm/world.h"

namespace loom {
class Backend;
}

namespace loom::comm {

// What a transport is, so that callers ask what it can do instead of testing its name (a
// communicator answers for itself too: Communicator::device_memory, in_one_process).
struct TransportKind {
  std::string name;
  std::string summary;
  bool built = false;
  std::string build_hint;      // how to build it when it was not ("-DLOOM_MPI=ON (needs ...)")
  bool device_memory = false;  // carries device buffers; workers compute on GPUs
  bool reaches_other_machines = false;  // its workers may be on other machines
  bool cancellable_requests = false;    // dropping a pending request withdraws it
};

// "thread", "mpi" and "nccl", whether built or not.
const std::vector<TransportKind>& transport_kinds();
// ConfigError listing the known names for one that is not among them.
const TransportKind& transport_kind(const std::string& name);
std::vector<std::string> known_transports();
bool transport_built(const std::string& name);

// "auto" becomes "mpi" when an MPI launcher started this process, else "thread"; other names
// are checked (unknown: ConfigError; not built: ConfigError naming LOOM_MPI=ON).
std::string resolve_transport(const std::string& name);

// `workers`: the world size for "thread" (>= 1); for "mpi" the launcher decides, and
// `workers` must be 0 (take the launcher's) or equal to it. "nccl" (device buffers, one GPU
// per worker: comm/nccl/nccl_world.h) bootstraps over MPI when a launcher started this process
// (workers as for "mpi"), else over `workers` threads; its communicators' device_backend(c) is
// the worker's CUDA backend. Not built: ConfigError naming LOOM_CUDA=ON; no GPU, or fewer GPUs
// than local workers: ConfigError.
// True when `transport`'s world size comes from an MPI launcher ("mpi", and "nccl" under one).
bool transport_uses_launcher(const std::string& transport);

std::unique_ptr<World> create_world(const std::string& transport, int workers,
                                    const CommOptions& options);

// The transport vendor's own float-sum allreduce on `c` (MPI_Allreduce for "mpi"), for the
// benchmark's peer. False if the transport has none.
// The backend whose device memory communicator c carries natively (nccl: its worker's CUDA
// backend), so the worker computes on it; nullptr for the host transports.
Backend* device_backend(const Communicator& c);

bool vendor_allreduce(Communicator& c, std::span<float> data);

// True when `c` is an MPI communicator whose collectives meet in the node's shared memory
// (every rank on this machine, comm.node_shm on); false for any other communicator.
bool mpi_node_shared_memory(const Communicator& c);

}  // namespace loom::comm
