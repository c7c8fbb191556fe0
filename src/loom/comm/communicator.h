// The transport boundary of loom, as small as gloo's pair: a rank, a world size, asynchronous
// point-to-point messages with handles, and the collectives built on them.
//
// Point-to-point follows MPI's matching rules: a receive matches the oldest unmatched send
// from the same peer with the same tag; messages between one pair with one tag never overtake
// each other. A send's buffer must stay valid (and unmodified) until its request is waited on;
// a receive's buffer is written by the time wait() returns. The byte counts of a send and of
// the receive it matches must be equal (a mismatch is a CommError naming both ranks).
//
// Faults: wait() gives up after options().timeout_s (config key comm.timeout_s, default 30 s)
// and throws loom::CommError naming the rank that stopped answering. A communicator that has
// failed stays failed: every later call throws the same error, so no rank hangs on a broken
// world.
//
// Collectives are written once on point-to-point (ring_*.cc, halving_doubling_allreduce.cc,
// two_level_allreduce.cc, binomial_broadcast.cc, dissemination_barrier.cc; see algorithms.h;
// comm.algorithm picks the allreduce, docs/comm.md) and therefore work over
// every transport; a transport may override a collective with a faster native path (the
// thread transport reduces straight out of shared buffers). Every rank must call the same
// collectives in the same order with the same sizes.
//
// Not thread-safe: one worker (thread) uses one Communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::comm {

// Tags 0 .. kMaxUserTag are the caller's; collectives use the range above it.
inline constexpr int kMaxUserTag = (1 << 14) - 1;
inline constexpr int kCollectiveTagBase = 1 << 14;

// comm.algorithm: which algorithm a float (or any reducer's) allreduce runs.
enum class AllreduceAlgorithm {
  kAuto,             // "auto": two-level where ranks span machines with several ranks each
                     // (buffers of at least comm.small_kib), else the transport's own path
  kRing,             // "ring": algo::ring_allreduce over point-to-point, always
  kHalvingDoubling,  // "halving-doubling": algo::halving_doubling_allreduce, always
  kTwoLevel,         // "two-level": algo::two_level_allreduce; the flat path (with a warning)
                     // where there is one machine or one rank per machine
};
// "auto", "ring", "halving-doubling", "two-level".
std::vector<std::string> allreduce_algorithm_names();
std::string allreduce_algorithm_name(AllreduceAlgorithm a);

struct CommOptions {
  double timeout_s = 30.0;                // comm.timeout_s: how long wait() waits for a peer
  size_t ring_chunk_bytes = 512 << 10;    // comm.ring_chunk_kib: pipelining unit of the ring
  size_t small_message_bytes = 64 << 10;  // comm.small_kib: below this, halving-doubling
  // comm.node_shm: MPI ranks that all run on one machine meet in a shared window for float
  // allreduce, reduce-scatter, allgather and barrier (mpi/node_shared_memory.h).
  bool node_shared_memory = true;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;  // comm.algorithm
  // comm.ranks_per_node: > 0 fakes machines of that many consecutive ranks (rank r on machine
  // r / ranks_per_node) instead of the machines the transport finds, for tests and for the
  // thread transport, whose ranks all share one machine; 0: as found.
  int ranks_per_node = 0;
};

// Which machine each rank runs on, as comm.ranks_per_node fakes it: rank r on machine
// r / ranks_per_node (the last machine has fewer ranks where it does not divide the world).
std::vector<int> consecutive_machines(int world_size, int ranks_per_node);

// The machines of a world: ranks[m] lists the ranks on machine m in increasing order; machines
// are numbered by their lowest rank.
struct MachineLayout {
  std::vector<std::vector<int>> ranks;
  int machines() const { return int(ranks.size()); }
  // The number of ranks on every machine, or 0 where machines differ.
  int ranks_per_machine() const;
  // "2 machines x 2 ranks" or "3 machines with 2, 2, 1 ranks".
  std::string describe() const;
};
// `machine_of_rank[r]`: any id, equal for ranks on one machine; empty: one machine of `world`.
MachineLayout machine_layout(std::span<const int> machine_of_rank, int world_size);

// How raw-byte collectives combine elements: acc[i] = acc[i] (op) in[i] for `count` elements
// of `elem_size` bytes. Must be associative and commutative (the order of a ring differs
// from the order of a tree). Sums of floats differ in the last bits between algorithms.
// `sum_f32_kind` marks sum_f32(): transports with a faster float-sum kernel of their own (the
// thread transport's one-pass sum over shared buffers) use it; everything else calls fn.
struct Reducer {
  size_t elem_size = 1;
  void (*fn)(void* acc, const void* in, size_t count) = nullptr;
  bool sum_f32_kind = false;
};
Reducer sum_f32();
Reducer sum_f64();
Reducer sum_i64();
Reducer max_i64();

// The half-open range of elements [begin, end) that rank `r` owns when `count` elements are
// split over `n` ranks: the first count % n ranks own one element more. Used by reduce_scatter
// and allgather (and by anything that shards a flat buffer by rank).
struct BlockRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};
BlockRange block_range(size_t count, int n, int r);

// State of one outstanding isend/irecv; transports derive from it.
struct RequestState {
  virtual ~RequestState() = default;
  // Called when its Request is dropped before wait() completed it, typically while its owner
  // unwinds from an error: on return the transport must no longer touch the request's buffer,
  // which the unwinding is about to free. The thread transport withdraws a send or receive
  // that no peer has matched, or waits out a copy under way.
  virtual void cancel() {}
  int peer = -1;
  int tag = 0;
  size_t bytes = 0;
  bool is_send = false;
};

// Handle to an isend/irecv. Move-only, cheap; empty after wait(). Dropping a pending one
// cancels it (RequestState::cancel).
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<RequestState> s) : state_(std::move(s)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      cancel_pending();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { cancel_pending(); }

  bool pending() const { return state_ != nullptr; }
  RequestState* state() const { return state_.get(); }
  void reset() { state_.reset(); }

 private:
  void cancel_pending() noexcept {
    if (state_) state_->cancel();
    state_.reset();
  }
  std::shared_ptr<RequestState> state_;
};

class Communicator {
 public:
  explicit Communicator(CommOptions options) : options_(options) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The transport's name: "thread", "mpi", "nccl".
  virtual std::string name() const = 0;
  // Whether the collectives take device memory (nccl: its worker's GPU) rather than host
  // memory. Which device is the registry's business (transport_registry.h device_backend).
  virtual bool device_memory() const { return false; }
  // Whether every worker of this communicator is a thread of this process (the thread
  // transport; nccl bootstrapped over threads): they share its memory and its cores. Otherwise
  // they are processes, and a launcher says how many share this machine.
  virtual bool in_one_process() const { return false; }

  // ---- point-to-point (the whole transport interface) ----
  virtual Request isend(int peer, const void* data, size_t bytes, int tag) = 0;
  virtual Request irecv(int peer, void* data, size_t bytes, int tag) = 0;
  // Blocks until the request completes; throws CommError naming the peer on timeout or loss.
  virtual void wait(Request& request) = 0;
  // Marks this communicator (and, where the transport can, the whole world) failed, so peers
  // blocked on it fail fast with `reason` instead of waiting for their timeout.
  virtual void abort(const std::string& reason) = 0;

  void wait_all(std::span<Request> requests);
  void send(int peer, const void* data, size_t bytes, int tag);
  void recv(int peer, void* data, size_t bytes, int tag);

  // ---- collectives on floats (sum) ----
  // In place: every rank ends with the element-wise sum over ranks.
  virtual void allreduce(std::span<float> data);
  // In place over the whole buffer: afterwards block_range(data.size(), size(), rank()) holds
  // the sum over ranks; the other elements are unspecified.
  virtual void reduce_scatter(std::span<float> data);
  // In place: block r (block_range) is rank r's contribution; afterwards all blocks are filled.
  virtual void allgather(std::span<float> data);
  virtual void broadcast(std::span<float> data, int root);

  // ---- collectives on raw bytes ----
  // `bytes` must be a multiple of reducer.elem_size; blocks are counted in elements.
  virtual void allreduce(void* data, size_t bytes, const Reducer& reducer);
  virtual void reduce_scatter(void* data, size_t bytes, const Reducer& reducer);
  // Block r of `data` holds elem_size-byte elements split by block_range(bytes/elem_size, ...).
  virtual void allgather(void* data, size_t bytes, size_t elem_size = 1);
  virtual void broadcast(void* data, size_t bytes, int root);
  virtual void barrier();

  // ---- sharded update (ZeRO stage 1) ----
  // Called with ranges [begin, end) that together cover exactly this rank's block of the
  // buffers; when called, grads[begin, end) holds the sum over ranks, and it must write
  // params[begin, end) from that sum and its own state, element by element (so one call over
  // the block and several over tiles of it give the same bits).
  using BlockUpdate = std::function<void(size_t begin, size_t end)>;
  // One step of a sharded optimizer: reduce-scatter `grads`, `update` this rank's block,
  // allgather `params` (the same sizes on every rank). Afterwards params holds every rank's
  // updated block and grads' own block the sum. The default is exactly those three calls; the
  // thread transport fuses them into one pass over the shared buffers (sum, update and copy to
  // every replica a tile at a time while the tile is in L1) between two rendezvous instead of
  // four.
  virtual void sharded_update(std::span<float> grads, std::span<float> params,
                              const BlockUpdate& update);

  const CommOptions& options() const { return options_; }
  void set_timeout(double seconds) { options_.timeout_s = seconds; }

  // A fresh tag in the collective range for the next collective call. Every rank calls the
  // collectives in the same order, so every rank draws the same tag.
  // A sub-communicator (group_communicator.h) draws its tags from the communicator it views, so
  // the tags of the collectives it runs never meet those of the parent's.
  virtual int next_collective_tag();

  // ---- machines (for comm.algorithm = "two-level") ----
  // Which machine each rank runs on (empty: all on one machine). The transport records it when
  // the world starts (mpi: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gathered from every rank;
  // thread: one machine), unless comm.ranks_per_node fakes it.
  const std::vector<int>& machine_of_rank() const { return machine_of_rank_; }
  // Records the machines and checks them against comm.algorithm: ConfigError for "two-level"
  // over machines with different numbers of ranks; rank 0 logs (once) where "two-level" falls
  // back to the flat path (one machine, or one rank per machine). Every rank of a world is
  // given the same list.
  void set_machines(std::vector<int> machine_of_rank);
  // The allreduce comm.algorithm and the machines choose for `bytes`.
  enum class AllreducePath { kTransport, kRing, kHalvingDoubling, kTwoLevel };
  AllreducePath allreduce_path(size_t bytes) const;

 protected:
  // Runs the point-to-point algorithm allreduce_path() names and returns true, or returns false
  // for kTransport: a transport's allreduce override calls it first.
  bool allreduce_by_algorithm(void* data, size_t bytes, const Reducer& reducer);

  CommOptions options_;

 private:
  uint32_t collective_seq_ = 0;
  std::vector<int> machine_of_rank_;
  bool two_level_applies_ = false;  // several machines, the same number (> 1) of ranks on each
};

}  // namespace loom::comm
