#include "loom/sync/ps/ps_placement.h"

#include "loom/core/error.h"
#include "loom/sync/ps/ps_server.h"
#include "loom/sync/ps/ps_strategy.h"
#include "loom/sync/ps/ps_thread_servers.h"

namespace loom::sync {

PsTrainingComm::PsTrainingComm(comm::Communicator& parent, int size)
    : comm::Communicator(parent.options()), parent_(parent), size_(size) {
  LOOM_CHECK(size >= 1 && size <= parent.size() && parent.rank() < size,
             "rank {} in the first {} of {} ranks", parent.rank(), size, parent.size());
}

void PsTrainingComm::check_peer(int peer, const char* op) const {
  if (peer < 0 || peer >= size_)
    throw CommError(fmt::format("rank {}: {} to/from rank {} outside the {} training ranks", rank(),
                                op, peer, size_));
}

comm::Request PsTrainingComm::isend(int peer, const void* data, size_t bytes, int tag) {
  check_peer(peer, "isend");
  return parent_.isend(peer, data, bytes, tag);
}

comm::Request PsTrainingComm::irecv(int peer, void* data, size_t bytes, int tag) {
  check_peer(peer, "irecv");
  return parent_.irecv(peer, data, bytes, tag);
}

int ps_training_ranks(const PsOptions& o, const comm::Communicator& world) {
  if (world.size() <= o.servers)
    throw ConfigError(fmt::format(
        "{}: key 'ps.servers': {} servers on dedicated ranks leave none of the {} ranks to "
        "train (ps.placement = \"ranks\" needs ps.servers + workers ranks, e.g. mpirun -np {})",
        o.servers_where, o.servers, world.size(), o.servers + 1));
  return world.size() - o.servers;
}

bool ps_server_rank(const PsOptions& o, const comm::Communicator& world) {
  return world.rank() >= ps_training_ranks(o, world);
}

void run_ps_server(const PsOptions& o, comm::Communicator& world) {
  serve_ps_shard(world, ps_training_ranks(o, world), o.optimizer);
}

std::unique_ptr<comm::Communicator> ps_training_comm(const PsOptions& o,
                                                     comm::Communicator& world) {
  return std::make_unique<PsTrainingComm>(world, ps_training_ranks(o, world));
}

std::unique_ptr<Strategy> make_ps_strategy(const PsOptions& o, comm::Communicator& comm,
                                           nn::Model& model) {
  // Cheap checks first, identical on every rank, so a bad value fails before servers start.
  plan_ps_layout(model.num_params(), plan_buckets(model.param_ranges(), o.bucket_bytes), o.servers);
  if (o.placement == PsPlacement::kRanks) {
    auto* training = dynamic_cast<PsTrainingComm*>(&comm);
    if (training == nullptr)
      throw ConfigError(
          "ps.placement = \"ranks\": the training loop must split off the server ranks "
          "(sync::ps_training_comm) before it makes the strategy");
    return std::make_unique<PsStrategy>(training->parent(), training->size(), model, o, nullptr);
  }
  if (comm.size() > 1 && !comm.in_one_process())
    throw ConfigError(fmt::format(
        "ps.placement = \"threads\" keeps the servers inside one process, but the {} transport "
        "runs the {} workers as processes: set ps.placement = \"ranks\" and start {} ranks "
        "(workers + ps.servers)",
        comm.name(), comm.size(), comm.size() + o.servers));
  std::shared_ptr<PsThreadServers> servers =
      PsThreadServers::share(comm, o.servers, o.optimizer, o.comm);
  comm::Communicator& ps = servers->worker_comm(comm.rank());
  return std::make_unique<PsStrategy>(ps, comm.size(), model, o, std::move(servers));
}

}  // namespace loom::sync
