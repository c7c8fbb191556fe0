// The NCCL transport: a Communicator over device buffers of one CudaBackend per rank, one GPU
// per rank (NCCL refuses two ranks on one GPU).
//
// Setup goes through an existing `bootstrap` communicator (thread or MPI, host memory): rank 0
// creates the NCCL unique id and broadcasts its bytes, then every rank joins on its backend's
// device. Every operation runs on the backend's communication stream, ordered after the work
// the calling thread has queued so far (CudaBackend::comm_after_caller): from the compute
// thread, everything queued on the compute stream; from a thread on the backend's side stream
// (a sync strategy's communication thread, Backend::enter_side), the work it queued there after
// the one mark it entered at. The call returns when the operation has finished, as the
// Communicator contract says; so a strategy's communication thread overlaps with the rest of
// backward on the compute stream.
//
// Point-to-point: isend/irecv are queued and launched together, in one NCCL group, at the
// first wait() (as PyTorch's batch_isend_irecv), so the ring algorithms' send-right /
// receive-left pairs cannot deadlock. A request dropped before wait() (RequestState::cancel)
// is withdrawn if it was not launched yet; a launched one is waited out, and when it cannot
// finish (a peer that never posts its side) the communicator is aborted after
// options().timeout_s, which stops NCCL's kernels: either way NCCL no longer touches the
// buffer when the drop returns. NCCL has no tags: messages between a pair match in
// order, and a byte-count mismatch is not detected (the contract's other transports check it).
//
// Collectives use NCCL's own: allreduce / reduce_scatter / allgather / broadcast (uneven
// block_range splits fall back to allreduce, or to one broadcast per rank), barrier as a
// one-float allreduce. Raw-byte reductions take sum_f32, sum_f64, sum_i64 and max_i64; any other
// Reducer is a host function and cannot run on device memory: CommError.
//
// Host memory: NCCL moves device memory only, but the training loop also runs small host-side
// collectives (metrics, the same-run check, stop signals) on its one communicator. A host
// buffer is detected (cudaPointerGetAttributes) and staged through device memory: copied in on
// the comm stream, reduced, copied back after the wait. Fine for a few bytes; gradients should
// live on the device.
//
// Every call first makes the backend's device current on the calling thread, so a sync
// strategy's communication thread may call it.
//
// Faults: wait() polls; after options().timeout_s the NCCL communicator is aborted and a
// CommError names the operation and this rank. Failed stays failed.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/tensor/cuda/cuda_backend.h"

namespace loom::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over bootstrap's ranks. `backend` must outlive this communicator.
  NcclCommunicator(Communicator& bootstrap, CudaBackend& backend, CommOptions options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  bool in_one_process() const override { return in_one_process_; }
  bool device_memory() const override { return true; }
  // The CUDA backend of this worker's GPU, whose memory the collectives take.
  Backend* backend() const { return backend_; }

  Request isend(int peer, const void* data, size_t bytes, int tag) override;
  Request irecv(int peer, void* data, size_t bytes, int tag) override;
  void wait(Request& request) override;
  void abort(const std::string& reason) override;

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;
  void allreduce(void* data, size_t bytes, const Reducer& reducer) override;
  void reduce_scatter(void* data, size_t bytes, const Reducer& reducer) override;
  void allgather(void* data, size_t bytes, size_t elem_size) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override;

 private:
  struct P2p;
  class Staged;
  void bind() const;
  bool on_device(const void* p) const;
  void check_alive() const;
  void check_peer(int peer, const char* op) const;
  // Queues everything not yet launched in one NCCL group; records each request's event.
  void flush();
  // Waits for the comm stream's work so far, with the timeout; `op` names it in errors.
  void finish(const char* op);
  void wait_event(cudaEvent_t event, const char* op);
  // RequestState::cancel of one of this communicator's requests.
  void withdraw(P2p& p) noexcept;

  CudaBackend* backend_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  bool in_one_process_ = false;  // bootstrapped over threads, not MPI ranks
  std::string failed_;
  std::vector<std::shared_ptr<P2p>> pending_;
  float* barrier_scratch_ = nullptr;
  cudaEvent_t done_ = nullptr;
  // Requests hold a weak copy: a request dropped after its communicator does not call back.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace loom::comm
