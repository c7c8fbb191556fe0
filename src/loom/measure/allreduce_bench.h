// `loom bench allreduce`: latency, algbw and busbw (nccl-tests: busbw = algbw x 2(n-1)/n) of
// allreduce by message size, for the thread transport and, under mpirun, the MPI transport
// with MPI_Allreduce timed in the same run as the peer. The cli prints the rows.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/world.h"

namespace loom::measure {

struct AllreduceBenchOptions {
  size_t min_bytes = 4 << 10;
  size_t max_bytes = 256 << 20;
  size_t factor = 4;      // sizes grow by this factor
  double budget_s = 0.6;  // per size and variant, approximately (5 timed repetitions)
  int iters = 0;          // > 0: exactly this many calls per repetition
  int threads = 2;        // world size of the thread transport
  bool thread = true;     // measure the thread transport
  bool mpi = true;        // measure the MPI transport (only under mpirun)
  size_t ring_chunk_bytes = comm::CommOptions{}.ring_chunk_bytes;  // the thread world's ring chunk
};

struct AllreduceBenchRow {
  std::string transport;  // "thread", "mpi"
  std::string algo;       // "native", "ring", "halving-doubling", "auto", "MPI_Allreduce"
  int ranks = 0;
  size_t bytes = 0;
  double lat_us = 0, algbw_gbs = 0, busbw_gbs = 0;
  int iters = 0;
  bool ok = false;     // the result matched the closed-form sum
  double vs_peer = 0;  // busbw / MPI_Allreduce's busbw at this size (0: peer not measured)
};

// Runs the benchmark; `mpi_world` may be null (not under mpirun). on_row is called on the
// process's rank 0 (MPI) for each row as soon as it is measured.
void run_allreduce_bench(comm::World* mpi_world, const AllreduceBenchOptions& options,
                         const std::function<void(const AllreduceBenchRow&)>& on_row);

}  // namespace loom::measure
