#include "loom/sync/model_parallel/model_parallel_strategy.h"

#include <span>

#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/sync/codec_state_io.h"
#include "loom/sync/model_parallel/model_parallel_block.h"
#include "loom/sync/model_parallel/model_parallel_model.h"

namespace loom::sync {

ModelParallelStrategy::ModelParallelStrategy(comm::Communicator& comm, nn::Model& model,
                                             optim::Optimizer& optimizer,
                                             std::shared_ptr<const compress::Codec> codec)
    : comm_(comm), model_(model), optimizer_(optimizer), codec_(std::move(codec)) {
  block_layer_ = model_parallel_block_index(model);
  LOOM_CHECK(block_layer_ >= 0, "the model-parallel strategy needs a model-parallel block");
  block_ = static_cast<ModelParallelBlock*>(model.layers()[size_t(block_layer_)].get());
  dp_count_ = model.num_params();
  for (const auto& r : model.param_ranges())
    if (r.layer == block_layer_) dp_count_ = r.offset;
  for (const auto& r : model.param_ranges())
    LOOM_CHECK(r.layer <= block_layer_, "layers after the model-parallel block");
  if (codec_ && comm_.size() > 1 && dp_count_ > 0)
    codec_state_ =
        std::make_unique<sync::CompressedAllreduceState>(sync::make_compressed_allreduce_state(
            *codec_, size_t(dp_count_), comm_.size(), comm_.rank(), "data-parallel layers"));
}

std::string ModelParallelStrategy::describe() const {
  return fmt::format(
      "model-parallel over {} ({} worker{}): {} dense/replicated floats local to each worker, "
      "{} data-parallel floats all-reduced after backward ({}); {}\n{}",
      comm_.name(), comm_.size(), comm_.size() == 1 ? "" : "s", model_.num_params() - dp_count_,
      dp_count_, codec_ ? codec_->name() : "fp32", block_->exchange().describe(),
      block_->summary());
}

void ModelParallelStrategy::start() {
  // Only the replicated part: the block's slices differ by design (and were drawn from the
  // single-worker streams, so they already agree with each other).
  if (dp_count_ > 0 && comm_.size() > 1)
    comm_.broadcast(std::span<float>(model_.params(), size_t(dp_count_)), 0);
}

float ModelParallelStrategy::grad_scale(int64_t local_batch) const {
  return 1.0f / float(local_batch * comm_.size());
}

void ModelParallelStrategy::begin_step(int64_t step, float lr) {
  (void)step;
  lr_ = lr;
  optimizer_.advance();
  ActivationExchange& ex = block_->exchange();  // drop what evaluation exchanged
  ex.take_bytes();
  ex.take_seconds();
}

void ModelParallelStrategy::on_gradients_ready(const nn::ParamRange& range) {
  if (range.layer != block_layer_) return;  // data-parallel: reduced in end_step
  optimizer_.update(model_.params() + range.offset, model_.grads() + range.offset, range.offset,
                    range.count, lr_);
}

void ModelParallelStrategy::end_step() {
  Stopwatch watch;
  if (dp_count_ > 0) {
    float* g = model_.grads();
    const int world = comm_.size();
    if (world > 1 && codec_state_) {
      sync::compressed_allreduce(comm_, *codec_, std::span<float>(g, size_t(dp_count_)),
                                 *codec_state_);
      stats_.bytes_sent += int64_t(codec_state_->wire_bytes);
    } else if (world > 1) {
      comm_.allreduce(std::span<float>(g, size_t(dp_count_)));
      stats_.bytes_sent += int64_t(sync::fp32_allreduce_wire_bytes(size_t(dp_count_), world));
    }
    optimizer_.update(model_.params(), g, 0, dp_count_, lr_);
  }
  if (comm_.size() > 1) ++stats_.exchanges;
  const double dp = watch.seconds();
  ActivationExchange& ex = block_->exchange();
  const double act = ex.take_seconds();
  stats_.bytes_sent += ex.take_bytes();
  stats_.comm_seconds += dp + act;
  stats_.exposed_seconds += dp + act;  // nothing overlaps: the exchanges sit on the critical path
}

void ModelParallelStrategy::save_state(StrategyState& out) const {
  if (codec_state_) save_codec_states(*codec_state_, "data_parallel", out);
}

void ModelParallelStrategy::restore_state(const StrategyState& in) {
  if (codec_state_) restore_codec_states(*codec_state_, "data_parallel", in);
}

}  // namespace loom::sync
