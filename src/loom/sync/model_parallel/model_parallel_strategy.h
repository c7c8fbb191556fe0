// The sync strategy of a model with a model-parallel block (model_parallel_block.h).
//
// The flat buffer splits in two at the block's parameter range: everything before it belongs
// to the data-parallel layers (replicated; each worker's gradient covers its own samples, so
// the gradients are summed over workers: one allreduce, fp32 or through `codec`, after
// backward), the block's range is local (slices of split layers, and replicated layers that
// computed the same gradient on every worker from the same gathered batch): updated on each
// worker from its own gradient, right when the block's backward is done. The loss gradient is
// scaled by 1/(global batch) as in the allreduce strategy, so both parts see the gradient of
// the mean loss over the global batch.
//
// Bytes per step count the block's activation exchanges and the data-parallel allreduce.
#pragma once

#include <memory>

#include "loom/compress/codec.h"
#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

class ModelParallelBlock;

class ModelParallelStrategy final : public Strategy {
 public:
  // codec: for the data-parallel gradients (nullptr: fp32). The model must hold a block.
  ModelParallelStrategy(comm::Communicator& comm, nn::Model& model, optim::Optimizer& optimizer,
                        std::shared_ptr<const compress::Codec> codec);
  std::string describe() const override;
  void start() override;
  float grad_scale(int64_t local_batch) const override;
  void begin_step(int64_t step, float lr) override;
  void on_gradients_ready(const nn::ParamRange& range) override;
  void end_step() override;
  // The data-parallel codec's residuals (hybrid with a codec); the block's slices are saved
  // per rank by the checkpoint itself (rank_local_params_offset).
  void save_state(StrategyState& out) const override;
  void restore_state(const StrategyState& in) override;
  int64_t rank_local_params_offset() const override { return dp_count_; }

  int64_t replicated_count() const { return dp_count_; }  // floats before the block
  int64_t local_count() const { return model_.num_params() - dp_count_; }

 private:
  comm::Communicator& comm_;
  nn::Model& model_;
  optim::Optimizer& optimizer_;
  std::shared_ptr<const compress::Codec> codec_;
  ModelParallelBlock* block_ = nullptr;
  int block_layer_ = -1;
  int64_t dp_count_ = 0;
  float lr_ = 0;
  std::unique_ptr<sync::CompressedAllreduceState> codec_state_;
};

}  // namespace loom::sync
