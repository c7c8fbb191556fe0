#include "loom/sync/ps/ps_thread_servers.h"

#include <map>

#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/core/log.h"
#include "loom/sync/ps/ps_server.h"

namespace loom::sync {

PsThreadServers::PsThreadServers(int num_workers, int num_servers,
                                 const optim::OptimizerOptions& optimizer,
                                 const comm::CommOptions& comm)
    : workers_(num_workers),
      servers_(num_servers),
      optimizer_(optimizer),
      world_(comm::make_thread_world(num_workers + num_servers, comm)),
      pushed_(new std::atomic<int64_t>[size_t(num_workers)]) {
  for (int w = 0; w < workers_; ++w) pushed_[size_t(w)].store(0);
  for (int s = 0; s < servers_; ++s) {
    threads_.emplace_back([this, s] {
      comm::Communicator& c = world_->local(workers_ + s);
      try {
        serve_ps_shard(c, workers_, optimizer_);
      } catch (const std::exception& e) {
        // Workers blocked on this server fail at once with the reason, not at their timeout.
        c.abort(fmt::format("parameter server {} failed: {}", s, e.what()));
        if (!stopped_.load()) log_debug("ps server thread {}: {}", s, e.what());
      }
    });
  }
}

PsThreadServers::~PsThreadServers() {
  if (!stopped_.load()) abort("training stopped before its end");
  for (auto& t : threads_) t.join();
}

comm::Communicator& PsThreadServers::worker_comm(int w) {
  LOOM_CHECK(w >= 0 && w < workers_, "worker {} of {}", w, workers_);
  return world_->local(w);
}

void PsThreadServers::abort(const std::string& reason) {
  world_->local(0).abort(reason);
}

void PsThreadServers::note_pushed(int w, int64_t steps) {
  pushed_[size_t(w)].store(steps);
}

void PsThreadServers::note_begin(int64_t step) {
  int64_t slowest = INT64_MAX;
  for (int w = 0; w < workers_; ++w) slowest = std::min(slowest, pushed_[size_t(w)].load());
  const int64_t lead = step - slowest;
  int64_t seen = max_lead_.load();
  while (lead > seen && !max_lead_.compare_exchange_weak(seen, lead)) {
  }
}

namespace {

// Groups being handed from rank 0 to the other worker threads of the same run.
struct Handoff {
  std::shared_ptr<PsThreadServers> group;
  int takers_left = 0;
};
std::mutex g_handoff_mu;
std::map<uint64_t, Handoff> g_handoffs;
uint64_t g_next_id = 1;

}  // namespace

std::shared_ptr<PsThreadServers> PsThreadServers::share(comm::Communicator& train, int num_servers,
                                                        const optim::OptimizerOptions& optimizer,
                                                        const comm::CommOptions& comm) {
  if (train.size() == 1) return std::make_shared<PsThreadServers>(1, num_servers, optimizer, comm);
  std::shared_ptr<PsThreadServers> group;
  uint64_t id = 0;
  if (train.rank() == 0) {
    group = std::make_shared<PsThreadServers>(train.size(), num_servers, optimizer, comm);
    std::lock_guard<std::mutex> lock(g_handoff_mu);
    id = g_next_id++;
    g_handoffs[id] = Handoff{group, train.size() - 1};
  }
  // An id, not a pointer: only threads of this process can redeem it.
  train.broadcast(&id, sizeof id, 0);
  if (train.rank() != 0) {
    std::lock_guard<std::mutex> lock(g_handoff_mu);
    auto it = g_handoffs.find(id);
    LOOM_CHECK(it != g_handoffs.end(), "ps: server group {} not found (rank {})", id, train.rank());
    group = it->second.group;
    if (--it->second.takers_left == 0) g_handoffs.erase(it);
  }
  return group;
}

}  // namespace loom::sync
