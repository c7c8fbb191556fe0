#include "loom/comm/nccl/nccl_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "loom/comm/nccl/nccl_check.h"
#include "loom/core/error.h"

namespace loom::comm {

struct NcclCommunicator::P2p : RequestState {
  void* data = nullptr;  // device memory NCCL moves: the caller's, or `staged`
  void* host = nullptr;  // the caller's host buffer when staged
  void* staged = nullptr;
  Backend* backend = nullptr;
  // The communicator, valid while `alive` (its token) has not expired.
  NcclCommunicator* owner = nullptr;
  std::weak_ptr<int> alive;
  bool launched = false;
  cudaEvent_t event = nullptr;
  // Dropped before wait(): withdrawn if not launched yet, else waited out (or the
  // communicator aborted), so that NCCL no longer touches the buffer on return.
  void cancel() override {
    if (!alive.expired()) {
      owner->withdraw(*this);
    } else if (launched && event) {
      // The communicator is gone: destroying it finished or aborted what it had launched.
      LOOM_CUDA_IGNORE(cudaEventSynchronize(event));
    }
  }
  ~P2p() override {
    if (event) LOOM_CUDA_IGNORE(cudaEventDestroy(event));
    if (staged) backend->deallocate(staged);
  }
};

// A collective's buffer in device memory: the caller's own, or a device copy of a host buffer
// (copied in on the comm stream now, copied back by copy_back() after the operation finished).
class NcclCommunicator::Staged {
 public:
  Staged(NcclCommunicator& c, void* data, size_t bytes) : c_(c), host_(data), bytes_(bytes) {
    if (bytes == 0 || c.on_device(data)) return;
    dev_ = c.backend_->allocate(bytes);
    c.backend_->comm_wait_for_compute();  // after the allocation's zeroing (compute stream)
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, c.backend_->comm_stream()));
  }
  ~Staged() {
    if (dev_) c_.backend_->deallocate(dev_);
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  void* get() const { return dev_ ? dev_ : host_; }
  // Call after finish(): the comm stream is idle, so a plain copy does not wait.
  void copy_back() {
    if (dev_) LOOM_CUDA_CHECK(cudaMemcpy(host_, dev_, bytes_, cudaMemcpyDeviceToHost));
  }

 private:
  NcclCommunicator& c_;
  void* host_;
  size_t bytes_;
  void* dev_ = nullptr;
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, CudaBackend& backend,
                                   CommOptions options)
    : Communicator(options),
      backend_(&backend),
      rank_(bootstrap.rank()),
      size_(bootstrap.size()),
      in_one_process_(bootstrap.in_one_process()) {
  ncclUniqueId id{};
  bind();
  if (rank_ == 0) LOOM_CUDA_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof(id), 0);
  LOOM_CUDA_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  barrier_scratch_ = static_cast<float*>(backend.allocate(sizeof(float)));
  // The allocation is zeroed on the compute stream; barrier() reads it on the comm stream.
  backend.comm_wait_for_compute();
  LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

void NcclCommunicator::bind() const {
  backend_->bind_device();
}

bool NcclCommunicator::on_device(const void* p) const {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is host memory; clear the sticky status
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

NcclCommunicator::~NcclCommunicator() {
  // Requests still held elsewhere see the token expire and no longer call back here.
  alive_.reset();
  pending_.clear();
  // No throwing from a destructor: errors are dropped and cleared (LOOM_CUDA_IGNORE).
  if (comm_) {
    if (failed_.empty()) {
      LOOM_CUDA_IGNORE(ncclCommDestroy(comm_));
    } else {
      LOOM_CUDA_IGNORE(ncclCommAbort(comm_));
    }
  }
  if (done_) LOOM_CUDA_IGNORE(cudaEventDestroy(done_));
  if (barrier_scratch_) backend_->deallocate(barrier_scratch_);
}

void NcclCommunicator::withdraw(P2p& p) noexcept {
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const std::shared_ptr<P2p>& q) { return q.get() == &p; });
  if (it != pending_.end()) {
    pending_.erase(it);  // never launched: no later flush() will
    return;
  }
  // An aborted communicator's kernels were stopped by ncclCommAbort.
  if (!p.launched || !failed_.empty()) return;
  try {
    bind();
    wait_event(p.event, p.is_send ? "cancelled send" : "cancelled recv");
  } catch (...) {
    // wait_event aborted the communicator (a peer that never matched it, or an NCCL error)
    // and recorded why in failed_: NCCL no longer touches the buffer either way.
  }
}

void NcclCommunicator::check_alive() const {
  if (!failed_.empty()) throw CommError(failed_);
}

void NcclCommunicator::check_peer(int peer, const char* op) const {
  if (peer < 0 || peer >= size_)
    throw CommError(
        fmt::format("nccl rank {}: {} to peer {} outside [0, {})", rank_, op, peer, size_));
}

void NcclCommunicator::abort(const std::string& reason) {
  if (failed_.empty()) failed_ = fmt::format("nccl rank {}: aborted: {}", rank_, reason);
  if (comm_) LOOM_CUDA_IGNORE(ncclCommAbort(comm_));
  comm_ = nullptr;
}

Request NcclCommunicator::isend(int peer, const void* data, size_t bytes, int tag) {
  check_alive();
  check_peer(peer, "isend");
  auto p = std::make_shared<P2p>();
  p->peer = peer;
  p->tag = tag;
  p->bytes = bytes;
  p->is_send = true;
  p->data = const_cast<void*>(data);
  p->backend = backend_;
  p->owner = this;
  p->alive = alive_;
  bind();
  if (bytes > 0 && !on_device(data)) {
    p->host = p->data;
    p->data = p->staged = backend_->allocate(bytes);
  }
  pending_.push_back(p);
  return Request(p);
}

Request NcclCommunicator::irecv(int peer, void* data, size_t bytes, int tag) {
  check_alive();
  check_peer(peer, "irecv");
  auto p = std::make_shared<P2p>();
  p->peer = peer;
  p->tag = tag;
  p->bytes = bytes;
  p->data = data;
  p->backend = backend_;
  p->owner = this;
  p->alive = alive_;
  bind();
  if (bytes > 0 && !on_device(data)) {
    p->host = data;
    p->data = p->staged = backend_->allocate(bytes);
  }
  pending_.push_back(p);
  return Request(p);
}

void NcclCommunicator::flush() {
  if (pending_.empty()) return;
  bind();
  backend_->comm_after_caller();
  const cudaStream_t s = backend_->comm_stream();
  for (auto& p : pending_)
    if (p->is_send && p->host)
      LOOM_CUDA_CHECK(cudaMemcpyAsync(p->staged, p->host, p->bytes, cudaMemcpyHostToDevice, s));
  LOOM_CUDA_CHECK(ncclGroupStart());
  for (auto& p : pending_) {
    if (p->is_send) {
      LOOM_CUDA_CHECK(ncclSend(p->data, p->bytes, ncclUint8, p->peer, comm_, s));
    } else {
      LOOM_CUDA_CHECK(ncclRecv(p->data, p->bytes, ncclUint8, p->peer, comm_, s));
    }
  }
  LOOM_CUDA_CHECK(ncclGroupEnd());
  for (auto& p : pending_) {
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&p->event, cudaEventDisableTiming));
    LOOM_CUDA_CHECK(cudaEventRecord(p->event, s));
    p->launched = true;
  }
  pending_.clear();
}

void NcclCommunicator::wait(Request& request) {
  if (!request.pending()) return;
  check_alive();
  auto* p = dynamic_cast<P2p*>(request.state());
  LOOM_CHECK(p != nullptr, "nccl rank {}: wait() on a request of another transport", rank_);
  bind();
  if (!p->launched) flush();
  wait_event(p->event, p->is_send ? "send" : "recv");
  if (!p->is_send && p->host)
    LOOM_CUDA_CHECK(cudaMemcpy(p->host, p->staged, p->bytes, cudaMemcpyDeviceToHost));
  request.reset();
}

void NcclCommunicator::wait_event(cudaEvent_t event, const char* op) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) LOOM_CUDA_CHECK(e);
    ncclResult_t async = ncclSuccess;
    LOOM_CUDA_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess) {
      const std::string why =
          fmt::format("nccl rank {}: {} failed: {}", rank_, op, ncclGetErrorString(async));
      abort(why);
      throw CommError(why);
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > options_.timeout_s) {
      const std::string why = fmt::format(
          "nccl rank {}: {} made no progress for {:.0f} s (comm.timeout_s): a peer is not "
          "taking part",
          rank_, op, waited);
      abort(why);
      throw CommError(why);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclCommunicator::finish(const char* op) {
  LOOM_CUDA_CHECK(cudaEventRecord(done_, backend_->comm_stream()));
  wait_event(done_, op);
}

namespace {

// The device-side equivalents of the Reducers NCCL can run.
bool nccl_reduction(const Reducer& r, ncclDataType_t* type, ncclRedOp_t* op) {
  if (r.fn == sum_f32().fn) return *type = ncclFloat32, *op = ncclSum, true;
  if (r.fn == sum_f64().fn) return *type = ncclFloat64, *op = ncclSum, true;
  if (r.fn == sum_i64().fn) return *type = ncclInt64, *op = ncclSum, true;
  if (r.fn == max_i64().fn) return *type = ncclInt64, *op = ncclMax, true;
  return false;
}

}  // namespace

void NcclCommunicator::allreduce(void* data, size_t bytes, const Reducer& reducer) {
  check_alive();
  ncclDataType_t type;
  ncclRedOp_t op;
  if (!nccl_reduction(reducer, &type, &op))
    throw CommError(
        fmt::format("nccl rank {}: allreduce with a custom Reducer cannot run on "
                    "device memory (use sum_f32/sum_f64/sum_i64/max_i64)",
                    rank_));
  LOOM_CHECK_EQ(bytes % reducer.elem_size, size_t(0));
  bind();
  flush();
  Staged buf(*this, data, bytes);
  backend_->comm_after_caller();
  LOOM_CUDA_CHECK(ncclAllReduce(buf.get(), buf.get(), bytes / reducer.elem_size, type, op, comm_,
                                backend_->comm_stream()));
  finish("allreduce");
  buf.copy_back();
}

void NcclCommunicator::reduce_scatter(void* data, size_t bytes, const Reducer& reducer) {
  check_alive();
  ncclDataType_t type;
  ncclRedOp_t op;
  const size_t count = bytes / reducer.elem_size;
  if (!nccl_reduction(reducer, &type, &op) || count % size_t(size_) != 0) {
    // Uneven blocks: a full allreduce meets the contract (this rank's block holds the sum).
    allreduce(data, bytes, reducer);
    return;
  }
  bind();
  flush();
  Staged buf(*this, data, bytes);
  backend_->comm_after_caller();
  const size_t block = count / size_t(size_);
  auto* base = static_cast<char*>(buf.get());
  // In place in NCCL's sense: the receive buffer is this rank's block of the send buffer.
  LOOM_CUDA_CHECK(ncclReduceScatter(base, base + size_t(rank_) * block * reducer.elem_size, block,
                                    type, op, comm_, backend_->comm_stream()));
  finish("reduce_scatter");
  buf.copy_back();
}

void NcclCommunicator::allgather(void* data, size_t bytes, size_t elem_size) {
  check_alive();
  LOOM_CHECK_EQ(bytes % elem_size, size_t(0));
  bind();
  flush();
  Staged buf(*this, data, bytes);
  backend_->comm_after_caller();
  const size_t count = bytes / elem_size;
  auto* base = static_cast<char*>(buf.get());
  const cudaStream_t s = backend_->comm_stream();
  if (count % size_t(size_) == 0) {
    const size_t block = count / size_t(size_) * elem_size;
    LOOM_CUDA_CHECK(ncclAllGather(base + size_t(rank_) * block, base, block, ncclUint8, comm_, s));
  } else {
    // Uneven blocks: each rank broadcasts its own block, all in one group.
    LOOM_CUDA_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const BlockRange b = block_range(count, size_, r);
      char* p = base + b.begin * elem_size;
      LOOM_CUDA_CHECK(ncclBroadcast(p, p, b.size() * elem_size, ncclUint8, r, comm_, s));
    }
    LOOM_CUDA_CHECK(ncclGroupEnd());
  }
  finish("allgather");
  buf.copy_back();
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  check_alive();
  check_peer(root, "broadcast root");
  bind();
  flush();
  Staged buf(*this, data, bytes);
  backend_->comm_after_caller();
  LOOM_CUDA_CHECK(
      ncclBroadcast(buf.get(), buf.get(), bytes, ncclUint8, root, comm_, backend_->comm_stream()));
  finish("broadcast");
  buf.copy_back();
}

void NcclCommunicator::barrier() {
  check_alive();
  bind();
  flush();
  backend_->comm_after_caller();
  LOOM_CUDA_CHECK(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_,
                                backend_->comm_stream()));
  finish("barrier");
}

}  // namespace loom::comm
