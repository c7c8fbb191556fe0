// Model-parallel dense layers (Megatron-LM's tensor parallelism, Shoeybi et al. 2019; the
// column/row split of Krizhevsky 2014's model-parallel fully connected layers). Both hold a
// slice of the single-worker Linear's W [out, in] and draw their initial values from the same
// stream as nn::Linear does, so a model-parallel model starts from the single-worker model's
// parameters, sliced. Slices come from comm::block_range: uneven widths are fine, a slice of
// zero features is refused naming the layer.
//
// Column-parallel: rank r owns output features cols_r = block_range(out, N, r) (rows of W and
// entries of b).
//   forward:  y_r = x W_r^T + b_r; gathered to y [rows, out] only if gather_output (a column
//             layer that does not feed a row-parallel one).
//   backward: dW_r = dy_r^T x, db_r = sum dy_r, dx = dy_r W_r is a PARTIAL sum over ranks: it is
//             all-reduced here (reduce_input_grad) or by whoever consumes it (the block's batch
//             gather reduce-scatters it by rows instead).
// Row-parallel: rank r owns input features ins_r = block_range(in, N, r) (columns of W); the
// bias is replicated.
//   forward:  y = allreduce(x_r W_r^T) + b, where x_r is the column layer's sharded output.
//   backward: dW_r = dy^T x_r, db = sum dy (the same on every rank), dx_r = dy W_r: no exchange.
// A column layer feeding a row layer (through ReLU/Dropout, which work on the shard) therefore
// costs one allreduce in forward (the row layer's) and one in backward (the column layer's dx),
// "f" and "g" of Megatron's MLP block.
#pragma once

#include <memory>

#include "loom/nn/layers/layer.h"
#include "loom/sync/model_parallel/parallel_exchange.h"
#include "loom/tensor/buffer.h"

namespace loom::sync {

class ColumnParallelLinear final : public nn::Layer {
 public:
  // `name` names the single-worker layer in errors ("layer 1 Linear(784 -> 10)").
  ColumnParallelLinear(int64_t in, int64_t out, ActivationExchange& ex, bool gather_output,
                       bool reduce_input_grad, std::string name);
  std::string kind() const override { return "ColumnParallelLinear"; }
  std::string describe() const override;
  nn::Shape build(const nn::Shape& input) override;
  int64_t num_params() const override { return in_ * local_ + local_; }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return 2 * in_ * local_; }
  void forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const nn::Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  int64_t first_col() const { return first_; }
  int64_t local_cols() const { return local_; }

 private:
  int64_t in_, out_, first_ = 0, local_ = 0;
  ActivationExchange& ex_;
  bool gather_output_, reduce_input_grad_;
  std::string name_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  std::vector<float> local_y_, local_dy_;
};

class RowParallelLinear final : public nn::Layer {
 public:
  RowParallelLinear(int64_t in, int64_t out, ActivationExchange& ex, std::string name);
  std::string kind() const override { return "RowParallelLinear"; }
  std::string describe() const override;
  nn::Shape build(const nn::Shape& input) override;
  int64_t num_params() const override { return local_ * out_ + out_; }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return 2 * local_ * out_; }
  void forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const nn::Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t in_, out_, first_ = 0, local_ = 0;
  ActivationExchange& ex_;
  std::string name_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

// Dropout on a gathered batch whose columns may be a shard [first, first + cols) of
// `features`: element (sample s, feature f) draws the same Philox element as nn::Dropout
// (s * features + f, keyed by the single-worker layer index), so the masks equal the
// single-worker model's whatever the split. Rows map to samples through the exchange layout.
// cols < 0: whole rows, width taken from build().
class ParallelDropout final : public nn::Layer {
 public:
  ParallelDropout(float p, int layer_index, int64_t features, int64_t first, int64_t cols,
                  const ActivationExchange& ex);
  std::string kind() const override { return "ParallelDropout"; }
  std::string describe() const override;
  nn::Shape build(const nn::Shape& input) override;
  void forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const nn::Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  float p_;
  int layer_index_;
  int64_t features_, first_, cols_;
  const ActivationExchange& ex_;
  std::vector<uint8_t> mask_;
};

}  // namespace loom::sync
