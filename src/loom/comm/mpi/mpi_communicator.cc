// MPI point-to-point with timeouts. wait() polls MPI_Testall (spinning first, then sleeping
// briefly between polls so an idle rank leaves the core to others) until its deadline, then
// names the peer. A failed communicator stays failed; the world skips MPI_Finalize then.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <thread>
#include <vector>

#include "loom/comm/mpi/mpi_world.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::comm {

namespace {

// MPI counts are int: larger messages go as several pieces with the same tag (in order).
constexpr size_t kMaxPiece = size_t(1) << 30;

struct MpiRequest : RequestState {
  std::vector<MPI_Request> reqs;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const CommOptions& o) : Communicator(o) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctrl_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ctrl_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    if (!failed_) {
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&ctrl_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  bool failed() const { return failed_; }
  MPI_Comm mpi_comm() const { return comm_; }

  Request isend(int peer, const void* data, size_t bytes, int tag) override {
    return post(peer, const_cast<void*>(data), bytes, tag, true);
  }
  Request irecv(int peer, void* data, size_t bytes, int tag) override {
    return post(peer, data, bytes, tag, false);
  }

  void wait(Request& request) override {
    if (!request.pending()) return;
    if (failed_) throw CommError(reason_);
    auto* req = static_cast<MpiRequest*>(request.state());
    const double start = now_seconds();
    const double deadline = start + options_.timeout_s;
    for (uint64_t polls = 0;; ++polls) {
      int done = 0;
      const int rc =
          MPI_Testall(int(req->reqs.size()), req->reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        fail(
            fmt::format("rank {} lost (mpi transport): MPI error {} while rank {} waited to {} "
                        "{} bytes (tag {}) {} it",
                        req->peer, rc, rank_, req->is_send ? "send" : "receive", req->bytes,
                        req->tag, req->is_send ? "to" : "from"));
      }
      if (done) break;
      if ((polls & 63) == 0) {
        const double t = now_seconds();
        if (t - start > 1e-3) {
          // After a millisecond of spinning: serve the control channel, and sleep between
          // polls so that an idle rank frees its core: 50 us at first, growing to 2% of the
          // time waited so far (at most 1 ms), so a long wait (a rank idling while another
          // measures, a straggler) wakes ~1000 times a second rather than 20000, and no wait
          // overshoots by more than 2%.
          serve_control(req->peer);
          const double nap_us = std::clamp((t - start) * 0.02 * 1e6, 50.0, 1000.0);
          std::this_thread::sleep_for(std::chrono::microseconds(int64_t(nap_us)));
        }
        if (t > deadline) {
          const int culprit = diagnose(req->peer);
          const std::string who = culprit >= 0
                                      ? fmt::format("rank {} stopped answering", culprit)
                                      : std::string("ranks wait for each other (deadlock)");
          const std::string msg = fmt::format(
              "{} (mpi transport): rank {} waited {:.1f} s to {} {} bytes (tag {}) {} rank {} "
              "(comm.timeout_s = {})",
              who, rank_, t - start, req->is_send ? "send" : "receive", req->bytes, req->tag,
              req->is_send ? "to" : "from", req->peer, options_.timeout_s);
          tell_everyone(msg);
          fail(msg);
        }
      }
    }
    request.reset();
  }

  void abort(const std::string& reason) override {
    if (!failed_) {
      const std::string msg = fmt::format("rank {} failed: {}", rank_, reason);
      tell_everyone(msg);
      failed_ = true;
      reason_ = msg;
    }
  }

 private:
  // The control channel (a second communicator, so it never mixes with data): a rank that
  // times out asks its peer whom that peer waits for, following the chain to the rank that
  // does not answer; a rank that fails tells everyone why, so they fail at once with the
  // same diagnosis rather than blame their neighbour at their own timeout.
  enum CtrlTag : int { kQuery = 1, kReply = 2, kAbort = 3 };

  // Answers queries (whom do I wait for) and adopts an abort message from a peer.
  void serve_control(int waiting_on) {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ctrl_, &flag, &st) != MPI_SUCCESS || !flag) {
        return;
      }
      int count = 0;
      MPI_Get_count(&st, MPI_CHAR, &count);
      std::string buf(size_t(std::max(count, 0)), '\0');
      MPI_Recv(buf.data(), count, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, ctrl_, MPI_STATUS_IGNORE);
      if (st.MPI_TAG == kQuery) {
        replies_.push_back(waiting_on);
        MPI_Request r;
        MPI_Isend(&replies_.back(), 1, MPI_INT, st.MPI_SOURCE, kReply, ctrl_, &r);
        MPI_Request_free(&r);
      } else if (st.MPI_TAG == kAbort) {
        fail(buf);
      }
    }
  }

  // Follows "waits for" from `peer`; returns the first rank that does not answer within a
  // grace period (or answers that it waits for nobody), -1 for a cycle.
  int diagnose(int peer) {
    const double grace = std::clamp(options_.timeout_s / 4, 0.2, 2.0);
    std::vector<bool> seen(size_t(size_), false);
    seen[size_t(rank_)] = true;
    int cur = peer;
    while (!seen[size_t(cur)]) {
      seen[size_t(cur)] = true;
      int q = 0, answer = -1;
      MPI_Request rq, sq;
      MPI_Isend(&q, 1, MPI_INT, cur, kQuery, ctrl_, &sq);
      MPI_Irecv(&answer, 1, MPI_INT, cur, kReply, ctrl_, &rq);
      const double until = now_seconds() + grace;
      int done = 0;
      while (!done && now_seconds() < until) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (!done) {
          serve_control(peer);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
      if (!done) {
        MPI_Cancel(&rq);
        MPI_Request_free(&rq);
        MPI_Request_free(&sq);
        return cur;
      }
      MPI_Request_free(&sq);
      if (answer < 0 || answer >= size_) return cur;
      cur = answer;
    }
    return -1;
  }

  void tell_everyone(const std::string& msg) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      MPI_Request r;
      MPI_Isend(msg.data(), int(msg.size()), MPI_CHAR, q, kAbort, ctrl_, &r);
      MPI_Request_free(&r);
    }
  }

  [[noreturn]] void fail(const std::string& msg) {
    abort_raw(msg);
    throw CommError(msg);
  }
  void abort_raw(const std::string& msg) {
    if (!failed_) {
      failed_ = true;
      reason_ = msg;
    }
  }

  Request post(int peer, void* data, size_t bytes, int tag, bool is_send) {
    if (failed_) throw CommError(reason_);
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw CommError(
          fmt::format("rank {}: {} to/from rank {} outside the world of {} ranks (or "
                      "itself)",
                      rank_, is_send ? "isend" : "irecv", peer, size_));
    }
    if (tag < 0 || tag >= 2 * kCollectiveTagBase) {
      throw CommError(
          fmt::format("rank {}: tag {} outside [0, {})", rank_, tag, 2 * kCollectiveTagBase));
    }
    auto req = std::make_shared<MpiRequest>();
    req->peer = peer;
    req->tag = tag;
    req->bytes = bytes;
    req->is_send = is_send;
    char* p = static_cast<char*>(data);
    size_t off = 0;
    do {  // at least one message, so empty messages still match
      const int len = int(std::min(kMaxPiece, bytes - off));
      MPI_Request r;
      const int rc = is_send ? MPI_Isend(p + off, len, MPI_BYTE, peer, tag, comm_, &r)
                             : MPI_Irecv(p + off, len, MPI_BYTE, peer, tag, comm_, &r);
      if (rc != MPI_SUCCESS) {
        fail(fmt::format("rank {}: MPI error {} posting a {} of {} bytes with rank {}", rank_, rc,
                         is_send ? "send" : "receive", bytes, peer));
      }
      req->reqs.push_back(r);
      off += size_t(len);
    } while (off < bytes);
    return Request(std::move(req));
  }

  MPI_Comm comm_, ctrl_;
  std::deque<int> replies_;  // buffers of replies in flight (stable addresses)
  int rank_ = 0, size_ = 1;
  bool failed_ = false;
  std::string reason_;
};

class MpiWorld final : public World {
 public:
  explicit MpiWorld(const CommOptions& o) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      owns_mpi_ = true;
    }
    comm_ = std::make_unique<MpiCommunicator>(o);
  }
  ~MpiWorld() override {
    const bool failed = comm_->failed();
    if (failed) {
      comm_.release();  // its MPI objects are not safe to free with a peer gone
      return;           // and MPI_Finalize could wait for the lost peer: skip it
    }
    comm_.reset();
    if (owns_mpi_) MPI_Finalize();
  }
  std::string transport() const override { return "mpi"; }
  int size() const override { return comm_->size(); }
  int local_size() const override { return 1; }
  Communicator& local(int i) override {
    LOOM_CHECK_EQ(i, 0);
    return *comm_;
  }
  void run(const std::function<void(Communicator&)>& fn) override {
    try {
      fn(*comm_);
    } catch (const std::exception& e) {
      comm_->abort(e.what());
      throw;
    }
  }

 private:
  std::unique_ptr<MpiCommunicator> comm_;
  bool owns_mpi_ = false;
};

}  // namespace

std::unique_ptr<World> make_mpi_world(const CommOptions& options) {
  return std::make_unique<MpiWorld>(options);
}

bool mpi_vendor_allreduce(Communicator& c, std::span<float> data) {
  auto* m = dynamic_cast<MpiCommunicator*>(&c);
  if (m == nullptr) return false;
  LOOM_CHECK_LE(data.size(), size_t(INT_MAX));
  const int rc =
      MPI_Allreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT, MPI_SUM, m->mpi_comm());
  if (rc != MPI_SUCCESS) throw CommError(fmt::format("MPI_Allreduce failed with error {}", rc));
  return true;
}

}  // namespace loom::comm
