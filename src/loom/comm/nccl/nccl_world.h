// The nccl transport's World: the workers of a bootstrap world (threads of this process, or
// the MPI ranks a launcher started), each on its own GPU with its own CUDA backend and an
// NcclCommunicator over it. Created by the transport registry (create_world("nccl", ...)).
//
// NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected",
// ncclInvalidUsage; NVIDIA/nccl issues #231 and #418: not supported, not only unchecked), so a
// machine needs one GPU per local worker: thread worker i takes device i; an MPI rank takes
// its node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID). Fewer GPUs
// than local workers is a ConfigError before NCCL starts.
//
// The NCCL communicators are created on the first run(), inside each worker (ncclCommInitRank
// is collective), and kept for later runs. local(i) is worker i's host (bootstrap)
// communicator: ranks, and host-side coordination before run().
#pragma once

#include <memory>

#include "loom/comm/world.h"

namespace loom::comm {

std::unique_ptr<World> make_nccl_world(std::unique_ptr<World> bootstrap,
                                       const CommOptions& options);

// CUDA devices visible to this process; 0 (with the driver's reason in *why) when none.
int nccl_device_count(std::string* why);

}  // namespace loom::comm
