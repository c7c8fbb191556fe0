// One parameter-server shard: the server loop of the classic design (Li et al., OSDI 2014).
// It receives its key range's initial parameters from rank 0, then for every step sums the
// N workers' gradient pieces (workers scale their loss by 1 / global batch, so the sum is the
// mean), runs the optimizer on the piece, and sends the updated piece back to every worker.
// Pieces are handled in the order backward produces them, so a server updates the last
// layers while workers are still in the backward of the first ones. The same loop serves as a
// thread inside the training process (ps_thread_servers.h) and as a dedicated rank.
#pragma once

#include "loom/comm/communicator.h"
#include "loom/optim/optimizer.h"

namespace loom::sync {

// Serves shard c.rank() - num_workers of a world whose first num_workers ranks train, until
// rank 0 sends stop (protocol: ps_protocol.h), updating with the optimizer `optimizer` says.
// Throws CommError naming the rank when a worker stops answering within comm.timeout_s.
void serve_ps_shard(comm::Communicator& c, int num_workers,
                    const optim::OptimizerOptions& optimizer);

}  // namespace loom::sync
