// Where the parameter servers run, and how the training loop and the strategy factory reach
// them.
//
// ps.placement = "threads" (default): one server thread per shard inside the process that
// runs the workers (ps_thread_servers.h). Needs every worker in this process: the thread
// transport, or a world of one.
//
// ps.placement = "ranks": with a world of N + S ranks (mpirun -np N+S, or workers = N+S on
// the thread transport), the last S ranks are servers and do not train. The training loop
// asks ps_server_rank() and runs run_ps_server() there; the other ranks train over
// ps_training_comm(), a communicator of the N training ranks whose point-to-point goes
// through the whole world, which the strategy uses to reach the servers.
#pragma once

#include <memory>

#include "loom/comm/communicator.h"
#include "loom/nn/graph/model.h"
#include "loom/sync/ps/ps_options.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

// The first `size` ranks of `parent` as a communicator of their own. Ranks keep their
// numbers, point-to-point goes straight to the parent, and the collectives are the portable
// ones written on point-to-point (with their own tag sequence).
class PsTrainingComm final : public comm::Communicator {
 public:
  PsTrainingComm(comm::Communicator& parent, int size);
  int rank() const override { return parent_.rank(); }
  int size() const override { return size_; }
  std::string name() const override { return parent_.name(); }
  comm::Request isend(int peer, const void* data, size_t bytes, int tag) override;
  comm::Request irecv(int peer, void* data, size_t bytes, int tag) override;
  void wait(comm::Request& request) override { parent_.wait(request); }
  void abort(const std::string& reason) override { parent_.abort(reason); }
  comm::Communicator& parent() { return parent_; }

 private:
  void check_peer(int peer, const char* op) const;
  comm::Communicator& parent_;
  int size_;
};

// Placement "ranks": the number of training ranks of `world` (ConfigError naming ps.servers
// when the world has no rank left to train).
int ps_training_ranks(const PsOptions& o, const comm::Communicator& world);
bool ps_server_rank(const PsOptions& o, const comm::Communicator& world);
// The server loop of rank `world.rank()`; returns when rank 0 stops the servers.
void run_ps_server(const PsOptions& o, comm::Communicator& world);
std::unique_ptr<comm::Communicator> ps_training_comm(const PsOptions& o, comm::Communicator& world);

// The strategy factory's "ps" branch. `comm`: the training communicator (for placement
// "ranks" the one ps_training_comm() made).
std::unique_ptr<Strategy> make_ps_strategy(const PsOptions& o, comm::Communicator& comm,
                                           nn::Model& model);

}  // namespace loom::sync
