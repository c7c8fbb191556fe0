// The MPI transport: one worker per process (mpirun -np N, srun), built into loom_comm_mpi
// when LOOM_MPI is ON/AUTO and MPI is found. Point-to-point maps onto MPI_Isend/MPI_Irecv of
// bytes; the collectives are loom's own (ring, halving-doubling, ...) on top of them.
// Only transport_registry.cc names this header.
#pragma once

#include <memory>
#include <span>

#include "loom/comm/communicator.h"
#include "loom/comm/world.h"

namespace loom::comm {

// Initialises MPI (MPI_THREAD_SERIALIZED) unless already done, and finalises it when
// destroyed (skipped after a failure, so a lost peer cannot hang the exit).
std::unique_ptr<World> make_mpi_world(const CommOptions& options);

// MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM) on the MPI communicator `c`: the vendor's
// allreduce, measured beside loom's as the benchmark's peer. False if `c` is not MPI.
bool mpi_vendor_allreduce(Communicator& c, std::span<float> data);

// Whether the MPI communicator `c` uses the node's shared memory; false if `c` is not MPI.
bool mpi_uses_node_shared_memory(const Communicator& c);

}  // namespace loom::comm
