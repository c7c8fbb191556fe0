#include "loom/comm/thread/thread_world_state.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <chrono>
#include <thread>

#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::comm {

ThreadWorldState::ThreadWorldState(int n, CommOptions options)
    : n_(n), options_(options), spin_seconds_(rendezvous_spin_seconds(n)) {
  for (int r = 0; r < n; ++r) slots_.push_back(std::make_unique<RankSlot>());
}

double ThreadWorldState::rendezvous_spin_seconds(int ranks) {
  // A rank that sleeps on the futex costs its peers ~11 us to wake on bare metal and 20-100 us
  // on a VM, where an idle vCPU is halted and woken through the hypervisor. Training's
  // rendezvous mostly wait 10-150 us (one rank's backward a little behind the other's), so
  // while every rank has a core of its own, a waiting rank keeps its core for up to 2 ms,
  // yielding every ~1 us to whatever else is runnable (a loader thread). With more ranks
  // than cores that core belongs to a rank that could be working: sleep soon instead.
  // Measured (Zen 5 VM, 2 workers, default MLP): 2-worker samples/s +3-5%.
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 || unsigned(ranks) <= cores ? 2e-3 : 0.0;
}

void ThreadWorldState::wake(int r) {
  RankSlot& s = slot(r);
  if (s.sleepers.load() > 0) {
    { std::lock_guard<std::mutex> lk(s.mu); }
    s.cv.notify_all();
  }
}

void ThreadRequest::cancel() {
  if (done.load()) return;
  // A send waits in the destination's mailbox, a receive in the owner's.
  RankSlot& box = world->slot(is_send ? peer : owner);
  {
    std::lock_guard<std::mutex> lk(box.box_mu);
    std::deque<PendingOp>& q = is_send ? box.sends : box.recvs;
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->req.get() == this) {
        q.erase(it);
        return;
      }
    }
  }
  // A peer took it from the mailbox and is copying now; its deliver() sets done right after.
  while (!done.load()) std::this_thread::yield();
}

void ThreadWorldState::complete(ThreadRequest& req) {
  const int owner = req.owner;
  req.done.store(true);  // seq_cst: pairs with the sleeper count in block_until
  wake(owner);
}

void ThreadWorldState::block_until(int me, int peer, double timeout_s,
                                   const std::function<bool()>& pred, const RequestState* req) {
  // Spin briefly (a hand-off costs ~0.35 us spinning against ~11 us through a futex), then
  // yield (more workers than cores), then, while every rank has a core, spin on with yields
  // for up to spin_seconds_, then sleep.
  for (int i = 0; i < 256; ++i) {
    if (pred()) return;
    _mm_pause();
  }
  if (aborted()) throw_aborted();
  for (int i = 0; i < 32; ++i) {
    if (pred()) return;
    std::this_thread::yield();
  }
  if (spin_seconds_ > 0) {
    const double until = now_seconds() + spin_seconds_;
    for (uint32_t i = 1;; ++i) {
      if (pred()) return;
      if (i % 64 == 0) {
        if (aborted()) throw_aborted();
        if (now_seconds() > until) break;
        std::this_thread::yield();
      }
      _mm_pause();
    }
  }
  RankSlot& s = slot(me);
  s.waiting_on.store(peer);
  const double start = now_seconds();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  bool ok = true;
  {
    std::unique_lock<std::mutex> lk(s.mu);
    s.sleepers.fetch_add(1);
    while (!pred() && !aborted()) {
      if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
        ok = pred();
        break;
      }
    }
    s.sleepers.fetch_sub(1);
  }
  if (ok && pred()) {
    s.waiting_on.store(-1);
    return;
  }
  if (aborted()) {
    s.waiting_on.store(-1);
    throw_aborted();
  }
  const std::string msg = diagnose(me, peer, now_seconds() - start, req);
  s.waiting_on.store(-1);
  abort(msg, me);
  throw_aborted();
}

int ThreadWorldState::follow_chain(int start) const {
  // Follow "waits for" edges until a rank that waits for nobody: that rank stopped answering.
  std::vector<bool> seen(size_t(n_), false);
  int cur = start;
  while (!seen[size_t(cur)]) {
    seen[size_t(cur)] = true;
    const RankSlot& s = *slots_[size_t(cur)];
    const int w = s.waiting_on.load();
    if (w == -1) return cur;
    if (w >= 0) {
      cur = w;
      continue;
    }
    // In a barrier: it waits for whoever has not entered that barrier yet.
    const uint64_t mine = s.arrivals.load();
    int next = -1;
    for (int q = 0; q < n_ && next < 0; ++q) {
      if (slots_[size_t(q)]->arrivals.load() < mine) next = q;
    }
    if (next < 0) return cur;
    cur = next;
  }
  return -1;  // a cycle: ranks wait for each other
}

std::string ThreadWorldState::diagnose(int me, int peer, double waited,
                                       const RequestState* req) const {
  std::string what;
  int first = peer;
  if (req != nullptr) {
    what = fmt::format("to {} {} bytes (tag {}) {} rank {}", req->is_send ? "send" : "receive",
                       req->bytes, req->tag, req->is_send ? "to" : "from", req->peer);
  } else {
    what = "the other ranks in a collective";
    const uint64_t mine = slots_[size_t(me)]->arrivals.load();
    for (int q = 0; q < n_; ++q) {
      if (slots_[size_t(q)]->arrivals.load() < mine) {
        first = q;
        break;
      }
    }
    if (first < 0) first = me;
  }
  const int culprit = follow_chain(first);
  if (culprit < 0) {
    return fmt::format("ranks wait for each other (deadlock): rank {} waited {:.1f} s {}", me,
                       waited, what);
  }
  return fmt::format("rank {} stopped answering (thread transport): rank {} waited {:.1f} s {}",
                     culprit, me, waited, what);
}

void ThreadWorldState::barrier(int me, double timeout_s) {
  if (aborted()) throw_aborted();
  RankSlot& s = slot(me);
  const uint64_t gen = barrier_gen_.load();
  s.arrivals.fetch_add(1);
  if (barrier_count_.fetch_add(1) + 1 == n_) {
    barrier_count_.store(0);
    barrier_gen_.fetch_add(1);
    for (int r = 0; r < n_; ++r) {
      if (r != me) wake(r);
    }
    return;
  }
  block_until(
      me, -2, timeout_s, [&] { return barrier_gen_.load() != gen; }, nullptr);
}

void ThreadWorldState::abort(const std::string& reason, int origin) {
  {
    std::lock_guard<std::mutex> lk(abort_mu_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    abort_origin_.store(origin);
    aborted_.store(true, std::memory_order_release);
  }
  for (int r = 0; r < n_; ++r) {
    RankSlot& s = slot(r);
    { std::lock_guard<std::mutex> lk(s.mu); }
    s.cv.notify_all();
  }
}

void ThreadWorldState::throw_aborted() const {
  std::lock_guard<std::mutex> lk(abort_mu_);
  throw CommError(abort_reason_);
}

}  // namespace loom::comm
