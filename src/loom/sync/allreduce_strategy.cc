#include "loom/sync/allreduce_strategy.h"

#include <span>

#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::sync {

AllreduceStrategy::AllreduceStrategy(comm::Communicator& comm, nn::Model& model,
                                     optim::Optimizer& optimizer, AllreduceOptions options)
    : comm_(comm),
      model_(model),
      optimizer_(optimizer),
      options_(options),
      buckets_(plan_buckets(model.param_ranges(), options.bucket_bytes)),
      tracker_(model.param_ranges(), buckets_) {
  LOOM_CHECK(model.backend().device() == Device::kCpu,
             "the allreduce strategy over host transports needs host memory");
  if (options_.overlap && comm_.size() > 1) queue_ = std::make_unique<BackgroundQueue>();
}

std::string AllreduceStrategy::describe() const {
  return fmt::format("allreduce over {} ({} workers), {} buckets of <= {} KiB, {}{}",
                     comm_.name(), comm_.size(), buckets_.size(), options_.bucket_bytes >> 10,
                     options_.overlap ? "overlapped with backward" : "after backward",
                     options_.shard_optimizer ? ", optimizer sharded" : "");
}

void AllreduceStrategy::start() {
  comm_.broadcast(std::span<float>(model_.params(), size_t(model_.num_params())), 0);
}

float AllreduceStrategy::grad_scale(int64_t local_batch) const {
  return 1.0f / float(local_batch * comm_.size());
}

void AllreduceStrategy::begin_step(int64_t step, float lr) {
  lr_ = lr;
  optimizer_.advance();
  tracker_.reset();
}

void AllreduceStrategy::combine(const Bucket& bucket) {
  Stopwatch watch;
  float* grads = model_.grads() + bucket.offset;
  float* params = model_.params() + bucket.offset;
  const size_t n = size_t(bucket.count);
  const int world = comm_.size();
  if (world == 1) {
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
  } else if (options_.shard_optimizer) {
    comm_.reduce_scatter(std::span<float>(grads, n));
    const comm::BlockRange mine = comm::block_range(n, world, comm_.rank());
    optimizer_.update(params + mine.begin, grads + mine.begin, bucket.offset + int64_t(mine.begin),
                      int64_t(mine.size()), lr_);
    comm_.allgather(std::span<float>(params, n));
    // Reduce-scatter moves (n-1)/n of the bucket out, allgather the same again.
    stats_.bytes_sent += int64_t(2 * (n - mine.size()) * sizeof(float));
  } else {
    comm_.allreduce(std::span<float>(grads, n));
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
    stats_.bytes_sent += int64_t(2 * n * (world - 1) / world * sizeof(float));
  }
  comm_seconds_ += watch.seconds();
}

void AllreduceStrategy::on_gradients_ready(const nn::ParamRange& range) {
  const int b = tracker_.ready(range);
  if (b < 0) return;
  if (queue_) {
    const Bucket bucket = buckets_[b];
    queue_->post([this, bucket] { combine(bucket); });
  } else if (!options_.overlap) {
    return;  // combined in end_step, after the whole backward
  } else {
    combine(buckets_[b]);
  }
}

void AllreduceStrategy::end_step() {
  Stopwatch waited;
  if (queue_) {
    queue_->wait_idle();
  } else if (!options_.overlap) {
    for (const auto& b : buckets_) combine(b);
  }
  stats_.exposed_seconds += waited.seconds();
  stats_.comm_seconds += comm_seconds_;
  comm_seconds_ = 0;
}

}  // namespace loom::sync
