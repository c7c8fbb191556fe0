// Data parallelism through a parameter server (sync = "ps"; Li et al., OSDI 2014): workers
// push each gradient bucket to the servers as soon as backward produces it, the servers
// average the workers' gradients and run the optimizer on their key range (ps_server.h), and
// workers pull the updated parameters. The optimizer therefore runs on the servers only.
//
// Consistency (ps.staleness = k). Version v is the parameters after the servers applied
// steps 0..v-1.
//   k = 0  synchronous: every pull returns parameters that include all workers' step-t
//          gradients, and end_step() returns with them in place (the pulls land straight in
//          the parameters, bucket by bucket, during backward); with fp32 sums in another
//          order, the same model as the allreduce strategy. Deterministic.
//   k > 0  stale synchronous parallel (Ho et al., NIPS 2013): step t computes on the newest
//          version that has arrived, and waits only when that is older than t - k. Beginning
//          step t needs version t - k, which needs every worker's step t-k-1 gradients, so a
//          worker runs up to k steps ahead of the slowest and no further. A communication
//          thread posts the pushes and waits for the pulls; pushes go out from a copy (the
//          next backward overwrites the gradients) and pulls land in one of k + 1 buffers.
//          With ps.exact_delay the version is always exactly max(0, t - k): timing-independent
//          bits, the worst case of the bound.
//          Stale gradients with momentum train worse than synchronous SGD (asynchrony acts as
//          extra momentum: Mitliagkas et al., "Asynchrony begets momentum", 2016). By default
//          the gradient is computed on the stale version extrapolated along the momentum to
//          the version it will be applied to (ps.lookahead). ps.stale_lr = "divide" also
//          divides the servers' learning rate by k (Zhang et al., "Staleness-aware
//          async-SGD", IJCAI 2016): it helps under a constant lr, and costs accuracy under
//          the default cosine schedule (docs/ps.md), so it is off by default.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "loom/sync/allreduce/buckets.h"
#include "loom/sync/background_queue.h"
#include "loom/sync/ps/ps_layout.h"
#include "loom/sync/ps/ps_options.h"
#include "loom/sync/ps/ps_protocol.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

class PsThreadServers;

class PsStrategy final : public Strategy {
 public:
  // `ps`: a world whose ranks 0..num_workers-1 are the workers (this one is ps.rank()) and
  // whose rank num_workers + s is server s. `servers`: the in-process server threads that
  // own `ps` (placement "threads"), or null when the servers are ranks of the world.
  PsStrategy(comm::Communicator& ps, int num_workers, nn::Model& model, PsOptions options,
             std::shared_ptr<PsThreadServers> servers);
  // Without finish(), fails the servers' world so that no server or worker waits for this one.
  ~PsStrategy() override;

  std::string describe() const override;
  // Checkpoints: rank 0 asks every server for its shard (parameters, optimizer buffers, step
  // counts) and keeps them as sections "ps.*" of its own state; the other workers keep none.
  // A restore puts the shards together by key and hands each server of this run its key
  // range, so the server count and the world size may differ from the checkpoint's. A
  // checkpoint without those sections (an older loom) leaves the servers' optimizer state
  // fresh, which the log says once.
  void save_state(StrategyState& out) const override;
  void restore_state(const StrategyState& in) override;
  std::string restore_resharded(const std::vector<StrategyState>& ranks) override;
  void start() override;
  float grad_scale(int64_t local_batch) const override;
  void begin_step(int64_t step, float lr) override;
  void on_gradients_ready(const nn::ParamRange& range) override;
  void end_step() override;
  // Waits for the outstanding pulls (the parameters end at the last version) and stops the
  // servers (rank 0).
  void finish() override;

  const PsLayout& layout() const { return layout_; }
  // Placement "threads": the most steps a worker began ahead of the slowest worker's pushed
  // steps, over the whole run and all workers (-1 when the servers are ranks).
  int64_t max_lead() const;

 private:
  struct InFlight {
    std::vector<comm::Request> requests;
  };
  void push_bucket(int b);
  void post_pieces(int b, int64_t step);
  void wait(std::vector<comm::Request>& requests, const char* what) const;
  // Rank 0: hands the servers' state of a checkpoint (rank 0's sections) to this run's
  // servers. Returns what is not exact ("" when all of it is).
  std::string restore_servers(const StrategyState& in);
  // k > 0: runs `fn` on the communication thread; an error is kept for the worker's thread.
  void post(std::function<void()> fn);
  // k > 0: blocks until version `needed` has arrived (rethrows a communication error) and
  // puts the parameters to compute on in place: the version taken, or with ps.lookahead that
  // version extrapolated to version `applied_at` (the one the next gradient is applied to).
  void take_version(int64_t needed, int64_t applied_at);
  // The learning rate the servers apply (staleness-aware: divided by k, ps.stale_lr).
  double server_lr(float lr) const;
  int server_rank(int s) const { return workers_ + s; }

  comm::Communicator& ps_;
  const int workers_;
  nn::Model& model_;
  PsOptions options_;
  std::shared_ptr<PsThreadServers> servers_;
  std::vector<Bucket> buckets_;
  BucketTracker tracker_;
  PsLayout layout_;
  const int slots_;                                   // staleness + 1
  std::vector<std::vector<float>> push_copy_, pull_;  // by slot (k > 0 only)
  std::vector<InFlight> in_flight_;                   // by slot
  std::vector<PsControl> control_;                    // by slot * servers + s (rank 0)
  int64_t step_ = -1;                                 // the step begun last
  int64_t version_ = 0;                               // the version in the parameters (k > 0)
  std::vector<float> base_, prev_base_;  // lookahead: versions version_ and prev_version_
  int64_t prev_version_ = -1;
  int buckets_pushed_ = 0;
  // k > 0: the communication thread, and what it tells the worker's thread.
  std::unique_ptr<BackgroundQueue> queue_;
  std::mutex mu_;
  std::condition_variable arrived_cv_;
  int64_t arrived_ = 0;  // newest version whose pulls are all in (guarded by mu_)
  std::exception_ptr error_;
  double comm_seconds_ = 0;
  bool started_ = false, finished_ = false;
  bool resumed_ = false;
  bool warned_ = false;  // the log said once that a restore was not exact  // restored, and no step
                         // begun since: the next step may be any
};

}  // namespace loom::sync
