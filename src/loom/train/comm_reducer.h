// nn::ReplicaReducer over the workers' communicator: what BatchNorm with `sync = true` sums its
// per-channel statistics with. Called on the compute thread; the run makes sure no other
// collective is in flight then (sync.overlap = "inline": combine_inline_for_replica_sums in
// train/trainer.cc).
#pragma once

#include <vector>

#include "loom/comm/communicator.h"
#include "loom/nn/layers/layer.h"
#include "loom/tensor/backend.h"

namespace loom::train {

class CommReducer final : public nn::ReplicaReducer {
 public:
  CommReducer(comm::Communicator& comm, Backend& backend) : comm_(comm), backend_(backend) {}
  int replicas() const override { return comm_.size(); }
  void sum(float* x, int64_t n) override {
    if (comm_.size() == 1 || n == 0) return;
    if (comm_.device_memory()) {
      comm_.allreduce(std::span<float>(x, size_t(n)));
      return;
    }
    host_.resize(size_t(n));
    backend_.copy_to_host(host_.data(), x, size_t(n) * sizeof(float));
    comm_.allreduce(std::span<float>(host_));
    backend_.copy_to_device(x, host_.data(), size_t(n) * sizeof(float));
  }

 private:
  comm::Communicator& comm_;
  Backend& backend_;
  std::vector<float> host_;
};

}  // namespace loom::train
