// Internals of the thread transport shared by its communicators: mailboxes for point-to-point
// matching, wake-ups, the shared-buffer rendezvous of the native collectives, abort, and the
// wait-for bookkeeping that names a rank that stopped answering.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"

namespace loom::comm {

class ThreadWorldState;

struct ThreadRequest : RequestState {
  // Withdraws the op from its mailbox if no peer has taken it, else waits until the peer's
  // copy has finished (deliver() completes both sides right after the memcpy).
  void cancel() override;
  ThreadWorldState* world = nullptr;
  int owner = -1;  // the rank that waits on this request
  std::atomic<bool> done{false};
  std::string error;  // set before done when the match failed (size mismatch)
};

struct PendingOp {
  int peer;  // the sender (in a destination's queue of sends) or the expected sender (recvs)
  int tag;
  void* buf;
  size_t bytes;
  std::shared_ptr<ThreadRequest> req;
};

// A cache line per rank, so ranks spinning on their own flags do not share lines.
struct alignas(64) RankSlot {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};
  std::atomic<int> waiting_on{-1};    // peer rank this rank is blocked on; -1 none; -2 a barrier
  std::atomic<uint64_t> arrivals{0};  // barriers this rank has entered
  // Mailbox of messages addressed to this rank.
  std::mutex box_mu;
  std::deque<PendingOp> sends;
  std::deque<PendingOp> recvs;
  // Shared-buffer collectives: the buffer this rank published.
  void* shared_buf = nullptr;
  size_t shared_bytes = 0;
  float* shared_params = nullptr;  // sharded_update's second buffer
};

class ThreadWorldState {
 public:
  ThreadWorldState(int n, CommOptions options);

  int size() const { return n_; }
  const CommOptions& options() const { return options_; }
  RankSlot& slot(int r) { return *slots_[size_t(r)]; }

  void complete(ThreadRequest& req);
  // Blocks rank `me` until pred() holds; `peer` is whom it waits for (-2: a barrier), `req`
  // the request (null for a barrier). Throws CommError on abort or after `timeout_s`, naming
  // the rank that stopped answering (and aborts the world so no other rank waits longer).
  void block_until(int me, int peer, double timeout_s, const std::function<bool()>& pred,
                   const RequestState* req);

  // All ranks meet; throws like block_until.
  void barrier(int me, double timeout_s);

  // The first abort wins: its reason is what every rank reports; origin is the rank (or -1).
  void abort(const std::string& reason, int origin);
  int abort_origin() const { return abort_origin_.load(); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  [[noreturn]] void throw_aborted() const;

 private:
  std::string diagnose(int me, int peer, double waited, const RequestState* req) const;
  int follow_chain(int start) const;
  void wake(int r);
  // How long a waiting rank spins (yielding) before it sleeps: see the definition.
  static double rendezvous_spin_seconds(int ranks);

  int n_;
  CommOptions options_;
  double spin_seconds_;
  std::vector<std::unique_ptr<RankSlot>> slots_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;
  std::string abort_reason_;
  std::atomic<int> abort_origin_{-1};
  // Central sense-free barrier: a count and a generation.
  std::atomic<int> barrier_count_{0};
  std::atomic<uint64_t> barrier_gen_{0};
};

}  // namespace loom::comm
