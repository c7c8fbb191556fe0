// Which transport carries the workers of a run, and how many there are: threads of this
// process, or one MPI rank per process (detected from the launcher's environment).
#pragma once

#include <functional>
#include <string>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"

namespace loom::train {

struct TransportPlan {
  std::string kind;  // "thread" or "mpi"
  int world = 1;
  int rank = 0;      // this process's first rank (0 for threads)
  comm::CommOptions options;
};

// Keys: transport, workers, comm.timeout_s. ConfigError for an unknown transport, workers < 1,
// or workers that disagree with the MPI launcher's world size.
TransportPlan plan_transport(const Config& cfg);

// Runs fn once per worker of this process (all N threads, or this MPI rank) and returns when
// all have finished; the first error of any worker is rethrown.
void run_workers(const TransportPlan& plan, const Config& cfg,
                 const std::function<void(comm::Communicator&)>& fn);

}  // namespace loom::train
