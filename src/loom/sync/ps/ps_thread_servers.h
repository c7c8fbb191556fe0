// Parameter servers as threads of the training process (ps.placement = "threads"), one thread
// per shard. They talk to the workers through a private thread-transport world of N + S
// ranks (workers 0..N-1, server s at N+s) rather than through queues of their own: the
// server loop and the protocol are then the very ones that run on dedicated MPI ranks, a
// message costs one copy (the thread transport's rendezvous copies straight from the
// sender's buffer into the receiver's), and a lost worker or server is reported the same way
// (CommError naming the rank after comm.timeout_s, or at once when a thread fails).
//
// The worker threads of one run share one group: rank 0 creates it and hands it to the
// others through the training communicator (share()). It also keeps the progress table that
// measures how far workers run ahead of each other under bounded staleness.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/world.h"
#include "loom/optim/optimizer.h"

namespace loom::sync {

class PsThreadServers {
 public:
  PsThreadServers(int num_workers, int num_servers, const optim::OptimizerOptions& optimizer,
                  const comm::CommOptions& comm);
  // Joins the server threads; aborts the private world first unless rank 0 stopped them.
  ~PsThreadServers();
  PsThreadServers(const PsThreadServers&) = delete;
  PsThreadServers& operator=(const PsThreadServers&) = delete;

  // Collective over the training communicator `train` (every worker calls it): rank 0 creates
  // the group, the others receive a share of it.
  static std::shared_ptr<PsThreadServers> share(comm::Communicator& train, int num_servers,
                                                const optim::OptimizerOptions& optimizer,
                                                const comm::CommOptions& comm);

  int num_workers() const { return workers_; }
  // Worker w's end of the private world (used by worker w's thread only).
  comm::Communicator& worker_comm(int w);
  // Rank 0 sent stop and the servers acknowledged it: joining them needs no abort.
  void mark_stopped() { stopped_.store(true); }
  // Fails the private world, so servers and workers blocked on it stop at once.
  void abort(const std::string& reason);

  // Progress table (for bounded staleness): worker w has pushed all of `steps` steps ...
  void note_pushed(int w, int64_t steps);
  // ... and is about to begin step `step`: records how far it is ahead of the slowest worker.
  void note_begin(int64_t step);
  // The most steps any worker began ahead of the slowest one's pushed steps.
  int64_t max_lead() const { return max_lead_.load(); }

 private:
  int workers_, servers_;
  optim::OptimizerOptions optimizer_;
  std::unique_ptr<comm::World> world_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  std::unique_ptr<std::atomic<int64_t>[]> pushed_;
  std::atomic<int64_t> max_lead_{0};
};

}  // namespace loom::sync
