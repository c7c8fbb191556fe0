// MPI point-to-point with timeouts, and collectives through the node's shared memory when every
// rank runs on one machine. wait() and the shared-memory barrier poll (spinning first, then
// sleeping briefly between polls so an idle rank leaves the core to others) until their
// deadline, then name the rank that stopped answering. A failed communicator stays failed; the
// world skips MPI_Finalize then.
#include <fmt/format.h>
#include <immintrin.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "loom/comm/mpi/mpi_world.h"
#include "loom/comm/mpi/node_shared_memory.h"
#include "loom/comm/sum_to_all.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::comm {

namespace {

// MPI counts are int: larger messages go as several pieces with the same tag (in order).
constexpr size_t kMaxPiece = size_t(1) << 30;

// Largest collective that goes through the node's shared memory (per half of each rank's
// region; the window is 2 x this per rank, its pages touched only as used). Training's
// buckets are 4 MiB; above 16 MiB the pipelined ring over point-to-point already beats
// MPI_Allreduce 1.1-2.6x (docs/comm.md).
constexpr size_t kNodeShmBytes = size_t(16) << 20;

// Which machine each rank runs on: the lowest world rank of the ranks that share its memory
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), gathered from every rank, so every rank holds
// the same list. Where the split fails, the processor names (host names) are compared.
std::vector<int> detect_machines(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> leaders(static_cast<size_t>(size));
  MPI_Comm node = MPI_COMM_NULL;
  int ok =
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
              node != MPI_COMM_NULL
          ? 1
          : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);  // one method on every rank
  if (ok) {
    int leader = rank;
    MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
    MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm);
  } else {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    std::vector<char> all(size_t(size) * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, comm);
    for (int r = 0; r < size; ++r) {
      leaders[size_t(r)] = r;
      for (int q = 0; q < r; ++q) {
        if (std::strncmp(&all[size_t(q) * MPI_MAX_PROCESSOR_NAME],
                         &all[size_t(r) * MPI_MAX_PROCESSOR_NAME], MPI_MAX_PROCESSOR_NAME) == 0) {
          leaders[size_t(r)] = q;
          break;
        }
      }
    }
  }
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  return leaders;
}

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
    if (o.node_shared_memory) shm_ = NodeSharedMemory::create(comm_, kNodeShmBytes);
    set_machines(o.ranks_per_node > 0 ? consecutive_machines(size_, o.ranks_per_node)
                                      : detect_machines(comm_));
  }
  ~MpiCommunicator() override {
    if (failed_) {
      if (shm_) shm_->abandon();
      return;
    }
    shm_.reset();
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&ctrl_);
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
    poll_until(
        [&] {
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
          return done != 0;
        },
        [&] { return req->peer; },
        [&](double waited) {
          return fmt::format(
              "(mpi transport): rank {} waited {:.1f} s to {} {} bytes (tag {}) {} rank {} "
              "(comm.timeout_s = {})",
              rank_, waited, req->is_send ? "send" : "receive", req->bytes, req->tag,
              req->is_send ? "to" : "from", req->peer, options_.timeout_s);
        });
    request.reset();
  }

  // ---- collectives through the node's shared memory (node_shared_memory.h) ----
  // Float (and any reducer's) allreduce, reduce-scatter, allgather and barrier when every rank
  // runs on this machine and the message fits a region; otherwise loom's point-to-point
  // algorithms. Sums run in rank order 0..n-1 (sum_to_all_f32), so every rank gets the same
  // bits, and the same bits as the thread transport's native collectives.
  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::reduce_scatter;
  bool shared_memory() const { return shm_ != nullptr; }

  void allreduce(void* data, size_t bytes, const Reducer& red) override {
    if (size_ > 1 && allreduce_by_algorithm(data, bytes, red)) return;  // comm.algorithm
    if (!use_shm(bytes)) return Communicator::allreduce(data, bytes, red);
    const BlockRange mine = share_for_reduction(data, bytes, red, "allreduce");
    reduce_block(data, mine, red, true);
    meet(bytes, "allreduce");
    copy_out_others(data, bytes / red.elem_size, red.elem_size);
  }

  void reduce_scatter(void* data, size_t bytes, const Reducer& red) override {
    if (!use_shm(bytes)) return Communicator::reduce_scatter(data, bytes, red);
    reduce_block(data, share_for_reduction(data, bytes, red, "reduce_scatter"), red, false);
  }

  void allgather(void* data, size_t bytes, size_t es) override {
    if (!use_shm(bytes)) return Communicator::allgather(data, bytes, es);
    LOOM_CHECK(es > 0 && bytes % es == 0, "{} bytes in {}-byte elements", bytes, es);
    shm_->next_collective();
    const size_t count = bytes / es;
    const BlockRange mine = block_range(count, size_, rank_);
    if (mine.size() > 0)
      std::memcpy(shm_->region(rank_) + mine.begin * es,
                  static_cast<const std::byte*>(data) + mine.begin * es, mine.size() * es);
    meet(bytes, "allgather");
    copy_out_others(data, count, es);
  }

  void barrier() override {
    if (!shm_) return Communicator::barrier();
    shm_->next_collective();
    meet(0, "barrier");
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
  bool use_shm(size_t bytes) const { return shm_ && bytes <= shm_->capacity(); }

  // Polls done() until it holds, for wait() and meet(). The first millisecond spins; after that
  // it serves the control channel and sleeps between polls so that an idle rank frees its
  // core: 50 us at first, growing to 2% of the time waited so far (at most 1 ms), so a long
  // wait (a rank idling while another measures, a straggler) wakes ~1000 times a second rather
  // than 20000, and no wait overshoots by more than 2%. Past comm.timeout_s it asks
  // waiting_on() (the rank it waits for) whom that one waits for, follows the chain to the rank
  // that does not answer, tells everyone, and fails with "<culprit> " + describe(seconds).
  template <class Done, class WaitingOn, class Describe>
  void poll_until(Done&& done, WaitingOn&& waiting_on, Describe&& describe) {
    const double start = now_seconds();
    const double deadline = start + options_.timeout_s;
    for (uint64_t polls = 0;; ++polls) {
      if (done()) return;
      if ((polls & 63) == 0) {
        const double t = now_seconds();
        if (t - start > 1e-3) {
          serve_control(waiting_on());
          const double nap_us = std::clamp((t - start) * 0.02 * 1e6, 50.0, 1000.0);
          std::this_thread::sleep_for(std::chrono::microseconds(int64_t(nap_us)));
        }
        if (t > deadline) {
          const int culprit = diagnose(waiting_on());
          const std::string who = culprit >= 0
                                      ? fmt::format("rank {} stopped answering", culprit)
                                      : std::string("ranks wait for each other (deadlock)");
          const std::string msg = who + " " + describe(t - start);
          tell_everyone(msg);
          fail(msg);
        }
      }
      _mm_pause();
    }
  }

  // The first half of a shared-memory reduction: this rank's elements outside its block go
  // into its region, and all ranks meet; returns this rank's block, now ready to be reduced.
  BlockRange share_for_reduction(const void* data, size_t bytes, const Reducer& red,
                                 const char* op) {
    LOOM_CHECK(red.fn != nullptr && red.elem_size > 0 && bytes % red.elem_size == 0,
               "{} bytes in {}-byte elements", bytes, red.elem_size);
    shm_->next_collective();
    const size_t count = bytes / red.elem_size;
    const BlockRange mine = block_range(count, size_, rank_);
    copy_in_except(data, count, red.elem_size, mine);
    meet(bytes, op);
    return mine;
  }

  // This rank's elements outside `mine` into its region, for the others to reduce from.
  void copy_in_except(const void* data, size_t count, size_t es, const BlockRange& mine) {
    const std::byte* d = static_cast<const std::byte*>(data);
    std::byte* reg = shm_->region(rank_);
    if (mine.begin > 0) std::memcpy(reg, d, mine.begin * es);
    if (count > mine.end)
      std::memcpy(reg + mine.end * es, d + mine.end * es, (count - mine.end) * es);
  }

  // Every other rank's block from its region into `data`.
  void copy_out_others(void* data, size_t count, size_t es) {
    std::byte* d = static_cast<std::byte*>(data);
    for (int q = 0; q < size_; ++q) {
      const BlockRange b = block_range(count, size_, q);
      if (q != rank_ && b.size() > 0)
        std::memcpy(d + b.begin * es, shm_->region(q) + b.begin * es, b.size() * es);
    }
  }

  // Block `b` summed over every rank (this rank's from `data`, the others' from their regions),
  // in rank order, into `data` and, when `to_region`, into this rank's region for the others.
  void reduce_block(void* data, const BlockRange& b, const Reducer& red, bool to_region) {
    if (b.size() == 0) return;
    const int m = to_region ? 2 : 1;
    if (red.sum_f32_kind) {
      std::vector<const float*>& src = shm_float_src_;
      src.clear();
      for (int q = 0; q < size_; ++q)
        src.push_back(q == rank_ ? static_cast<const float*>(data)
                                 : reinterpret_cast<const float*>(shm_->region(q)));
      float* dst[2] = {static_cast<float*>(data), reinterpret_cast<float*>(shm_->region(rank_))};
      sum_to_all_f32(src.data(), size_, dst, m, b.begin, b.end);
      return;
    }
    std::vector<const std::byte*>& src = shm_src_;
    src.clear();
    for (int q = 0; q < size_; ++q)
      src.push_back(q == rank_ ? static_cast<const std::byte*>(data) : shm_->region(q));
    std::byte* dst[2] = {static_cast<std::byte*>(data), shm_->region(rank_)};
    reduce_to_all(src.data(), size_, dst, m, b.begin, b.end, red);
  }

  // A barrier over the node's shared memory, with the point-to-point wait's timeout and
  // diagnosis; then checks every rank passed the same byte count.
  void meet(size_t bytes, const char* op) {
    if (failed_) throw CommError(reason_);
    const uint64_t target = shm_->arrive(bytes);
    int behind = -1;
    poll_until([&] { return (behind = shm_->first_behind(target)) < 0; }, [&] { return behind; },
               [&](double waited) {
                 return fmt::format(
                     "(mpi transport, shared memory): rank {} waited {:.1f} s in {} of {} bytes "
                     "for rank {} (comm.timeout_s = {})",
                     rank_, waited, op, bytes, behind, options_.timeout_s);
               });
    for (int q = 0; q < size_; ++q) {
      const size_t theirs = shm_->bytes_of(q);
      if (theirs != bytes)
        fail(fmt::format("{}: rank {} passed {} bytes but rank {} passed {}", op, rank_, bytes, q,
                         theirs));
    }
  }

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
  std::unique_ptr<NodeSharedMemory> shm_;  // null: ranks on several machines, or switched off
  // reduce_block's source tables, kept to not allocate per call.
  std::vector<const float*> shm_float_src_;
  std::vector<const std::byte*> shm_src_;
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
    try {
      comm_ = std::make_unique<MpiCommunicator>(o);
    } catch (const ConfigError&) {
      // Every rank refuses the same layout (the same gathered list): end MPI cleanly.
      if (owns_mpi_) MPI_Finalize();
      throw;
    }
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

bool mpi_uses_node_shared_memory(const Communicator& c) {
  const auto* m = dynamic_cast<const MpiCommunicator*>(&c);
  return m != nullptr && m->shared_memory();
}

}  // namespace loom::comm
