// The model-parallel part of a network as ONE layer of the nn::Model (docs/model_parallel.md).
//
// Krizhevsky 2014 ("One weird trick for parallelizing convolutional neural networks"): the
// layers before the block run data-parallel, each worker on its own samples; at the block
// every worker gathers all workers' activations (the batch grows from b to N b rows), runs
// the dense layers model-parallel on the whole gathered batch (each worker holds a slice of
// each split layer), and keeps only its own rows of the logits for the loss. Backward mirrors
// it: the loss gradients of all rows are gathered (fp32; they are tiny), the dense layers'
// backward gives the gradient of the gathered input, and a reduce-scatter by rows hands each
// worker the sum over workers of its own rows (the column-parallel layer's dx is a partial
// sum; the reduce-scatter is its allreduce and the gather's backward in one exchange).
//
// Because the gathered batch is the same on every worker, the block's parameters need no
// reduction: split layers update their slice locally, and replicated layers in the block
// (the classifier, ReLU-free layers) compute the same gradient on every worker. The sync
// strategy (model_parallel_strategy.h) therefore reduces only the layers before the block.
//
// Why one layer: the block's row count (the gathered batch) differs from the model's, so it
// keeps its own activation buffers; the model's flat buffer sees one parameter range for the
// whole block (its sublayers' slices, laid end to end), which is how the strategy tells
// replicated ranges (before the block) from local ones (the block).
//
// Layer indices: each sublayer keeps the index it has in the single-worker model (dropout
// keys, initial-value streams), so a block with identity exchange reproduces the
// single-worker model.
#pragma once

#include <memory>
#include <vector>

#include "loom/nn/layers/layer.h"
#include "loom/sync/model_parallel/parallel_exchange.h"

namespace loom::sync {

struct BlockSublayer {
  std::unique_ptr<nn::Layer> layer;
  int index = 0;  // layer index in the single-worker model
};

class ModelParallelBlock final : public nn::Layer {
 public:
  // input_grad: whether a layer before the block has parameters (else backward skips the
  // exchange). input_grad_partial: the first sublayers pass a partial sum back (a column
  // layer that leaves its dx to the block); else the gathered input gradient is complete.
  ModelParallelBlock(std::shared_ptr<ActivationExchange> ex, std::vector<BlockSublayer> layers,
                     uint64_t init_seed, bool input_grad, bool input_grad_partial);
  std::string kind() const override { return "ModelParallel"; }
  std::string describe() const override;
  nn::Shape build(const nn::Shape& input) override;
  int64_t num_params() const override;
  void bind(float* params, float* grads) override;
  // Each sublayer draws from Rng(init_seed, 0, kInit, its single-worker index), as
  // nn::Model::init_params does (init_seed: the config's `seed`).
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override;
  void forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const nn::Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  ActivationExchange& exchange() { return *ex_; }
  const std::vector<BlockSublayer>& sublayers() const { return layers_; }
  // One line per sublayer, for the model summary.
  std::string summary() const;

 private:
  void ensure(int64_t rows);

  std::shared_ptr<ActivationExchange> ex_;
  std::vector<BlockSublayer> layers_;
  uint64_t seed_;
  bool input_grad_, input_grad_partial_;
  int64_t in_features_ = 0, out_features_ = 0, widest_ = 0;
  std::vector<int64_t> widths_;   // output features of each sublayer
  std::vector<int64_t> offsets_;  // parameter offset of each sublayer
  int64_t capacity_ = 0;
  std::vector<float> input_;                 // gathered input [rows, in]
  std::vector<std::vector<float>> acts_;     // sublayer outputs
  std::vector<float> grad_a_, grad_b_, dy_;  // ping-pong gradients, gathered loss gradient
};

}  // namespace loom::sync
