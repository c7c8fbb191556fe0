// Data parallelism by bucketed allreduce overlapped with backward.
//
// Each bucket's gradients are combined on the worker's communication thread as soon as
// backward has produced them. With the optimizer sharded (sync.shard_optimizer, the default)
// a bucket is reduce-scattered, each rank updates the block it owns (optimizer state is flat
// and sliced by offset, so the arithmetic per element is exactly that of a full update), and
// the updated parameters are all-gathered: every replica ends the step with the same bits,
// and each rank does 1/N of the optimizer's memory traffic (ZeRO stage 1, Rajbhandari et al.
// 2020). Without sharding, the bucket is all-reduced and every rank updates all of it.
//
// The loss gradient is scaled by 1/(global batch), so the sum over ranks is the mean.
#pragma once

#include <memory>

#include "loom/sync/background_queue.h"
#include "loom/sync/buckets.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

struct AllreduceOptions {
  int64_t bucket_bytes = 4 << 20;  // sync.bucket_kib
  bool overlap = true;             // sync.overlap: combine buckets on a background thread
  bool shard_optimizer = true;     // sync.shard_optimizer
};

class AllreduceStrategy final : public Strategy {
 public:
  AllreduceStrategy(comm::Communicator& comm, nn::Model& model, optim::Optimizer& optimizer,
                    AllreduceOptions options);
  std::string describe() const override;
  void start() override;
  float grad_scale(int64_t local_batch) const override;
  void begin_step(int64_t step, float lr) override;
  void on_gradients_ready(const nn::ParamRange& range) override;
  void end_step() override;

  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void combine(const Bucket& bucket);

  comm::Communicator& comm_;
  nn::Model& model_;
  optim::Optimizer& optimizer_;
  AllreduceOptions options_;
  std::vector<Bucket> buckets_;
  BucketTracker tracker_;
  std::unique_ptr<BackgroundQueue> queue_;
  float lr_ = 0;
  double comm_seconds_ = 0;  // written by the comm thread, read after wait_idle()
};

}  // namespace loom::sync
