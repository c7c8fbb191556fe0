// Several ranks on one GPU, for the tests of code that takes a device communicator (the
// device compressed allreduce, the allreduce strategy over device gradients) at world sizes
// above one. NCCL wants one GPU per rank, so this stand-in moves bytes with cudaMemcpy between
// the ranks' device buffers instead: each rank is a thread with its own CudaBackend (its own
// streams and pool) on device 0, and a host thread communicator (the thread transport) gives
// the rendezvous, the timeouts and the abort when a rank fails.
//
// Every collective first waits for the work the calling thread queued on its backend (its
// stream: compute, or side inside SideStream), publishes its buffer, meets the others, then
// reads the peers' buffers with copies on its own stream. Reductions run on the host in rank
// order, so every rank gets the same bits; reduce_scatter writes only the caller's block, as
// the contract allows, so code that reads another block afterwards shows. Point-to-point
// stages through host memory over the thread transport. Buffers may be device or host memory
// (cudaMemcpyDefault). Slow, and not a model of NCCL's timing: for correctness only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cuda_check.h"

namespace loom::test {

class DeviceThreadComm final : public comm::Communicator {
 public:
  // published: one slot per rank, shared by the ranks of one world.
  DeviceThreadComm(comm::Communicator& host, CudaBackend& backend, std::vector<void*>& published)
      : Communicator(host.options()), host_(host), be_(backend), published_(published) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return "device-thread"; }
  bool device_memory() const override { return true; }

  comm::Request isend(int peer, const void* data, size_t bytes, int tag) override {
    auto st = std::make_shared<Staged>();
    st->host.resize(bytes);
    if (bytes > 0) {
      settle();
      copy(st->host.data(), data, bytes);
      settle();
    }
    st->inner = host_.isend(peer, st->host.data(), bytes, tag);
    return comm::Request(st);
  }

  comm::Request irecv(int peer, void* data, size_t bytes, int tag) override {
    auto st = std::make_shared<Staged>();
    st->host.resize(bytes);
    st->dst = data;
    st->inner = host_.irecv(peer, st->host.data(), bytes, tag);
    return comm::Request(st);
  }

  void wait(comm::Request& request) override {
    if (!request.pending()) return;
    auto* st = dynamic_cast<Staged*>(request.state());
    LOOM_CHECK(st != nullptr, "device-thread: wait() on a request of another transport");
    host_.wait(st->inner);
    if (st->dst && !st->host.empty()) {
      copy(st->dst, st->host.data(), st->host.size());
      settle();
    }
    request.reset();
  }

  void abort(const std::string& reason) override { host_.abort(reason); }

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  void allreduce(void* data, size_t bytes, const comm::Reducer& reducer) override {
    reduce(data, bytes, reducer, /*whole=*/true);
  }

  void reduce_scatter(void* data, size_t bytes, const comm::Reducer& reducer) override {
    reduce(data, bytes, reducer, /*whole=*/false);
  }

  void allgather(void* data, size_t bytes, size_t elem_size) override {
    LOOM_CHECK(elem_size > 0 && bytes % elem_size == 0, "{} bytes in {}-byte elements", bytes,
               elem_size);
    publish(data);
    const size_t count = bytes / elem_size;
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const comm::BlockRange b = comm::block_range(count, size(), r);
      if (b.size() == 0) continue;
      copy(static_cast<char*>(data) + b.begin * elem_size,
           static_cast<const char*>(published_[size_t(r)]) + b.begin * elem_size,
           b.size() * elem_size);
    }
    settle();
    host_.barrier();  // no peer writes its buffer again before everyone has read it
  }

  void broadcast(void* data, size_t bytes, int root) override {
    publish(data);
    if (rank() != root && bytes > 0) copy(data, published_[size_t(root)], bytes);
    settle();
    host_.barrier();
  }

  void barrier() override {
    settle();
    host_.barrier();
  }

 private:
  struct Staged : comm::RequestState {
    std::vector<std::byte> host;
    void* dst = nullptr;  // a receive's destination
    comm::Request inner;  // declared last: dropped (and so cancelled) before `host` goes
  };

  // Waits for the work the calling thread has queued on its stream of this rank's backend.
  void settle() {
    be_.bind_device();
    LOOM_CUDA_CHECK(cudaStreamSynchronize(be_.stream()));
  }
  void copy(void* dst, const void* src, size_t bytes) {
    be_.bind_device();
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, be_.stream()));
  }
  void publish(void* data) {
    settle();
    published_[size_t(rank())] = data;
    host_.barrier();
  }

  void reduce(void* data, size_t bytes, const comm::Reducer& reducer, bool whole) {
    LOOM_CHECK(reducer.elem_size > 0 && bytes % reducer.elem_size == 0,
               "{} bytes in {}-byte elements", bytes, reducer.elem_size);
    const size_t count = bytes / reducer.elem_size;
    publish(data);
    const comm::BlockRange mine =
        whole ? comm::BlockRange{0, count} : comm::block_range(count, size(), rank());
    const size_t off = mine.begin * reducer.elem_size, len = mine.size() * reducer.elem_size;
    std::vector<std::vector<std::byte>> parts(static_cast<size_t>(size()),
                                              std::vector<std::byte>(len));
    for (int r = 0; r < size() && len > 0; ++r)
      copy(parts[size_t(r)].data(), static_cast<const char*>(published_[size_t(r)]) + off, len);
    settle();
    host_.barrier();  // everyone has read every buffer before anyone writes its own
    for (int r = 1; r < size() && len > 0; ++r)
      reducer.fn(parts[0].data(), parts[size_t(r)].data(), mine.size());
    if (len > 0) copy(static_cast<char*>(data) + off, parts[0].data(), len);
    settle();
  }

  comm::Communicator& host_;
  CudaBackend& be_;
  std::vector<void*>& published_;
};

// Runs fn(comm, backend) on `ranks` threads, each rank with its own CudaBackend on device 0,
// and joins them; the first error a rank throws is rethrown here (ThreadWorld::run). The
// backends are made once per process and reused by later worlds (each costs a context's
// streams and cuBLAS handles).
inline void run_device_world(int ranks,
                             const std::function<void(comm::Communicator&, CudaBackend&)>& fn) {
  static std::vector<std::unique_ptr<CudaBackend>> backends;
  while (backends.size() < size_t(ranks)) backends.push_back(std::make_unique<CudaBackend>(0));
  std::vector<void*> published(size_t(ranks), nullptr);
  comm::ThreadWorld world(ranks);
  world.run([&](comm::Communicator& host) {
    CudaBackend& be = *backends[size_t(host.rank())];
    DeviceThreadComm c(host, be, published);
    fn(c, be);
  });
}

}  // namespace loom::test
