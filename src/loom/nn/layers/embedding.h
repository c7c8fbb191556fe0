// The input layers of a sequence model: Embedding turns token ids into vectors,
// PositionEmbedding adds a learned vector per position, and ClassToken puts learned positions
// before the others. Token ids arrive as floats (the data
// path carries every input as floats); each must be an integer in [0, vocab).
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

// [time] token ids -> [time, dim]: row id of a [vocab, dim] table, as torch.nn.Embedding.
// Backward adds each position's gradient into its token's row; the ids get no gradient.
class Embedding final : public Layer {
 public:
  Embedding(int64_t vocab, int64_t dim);
  std::string kind() const override { return "Embedding"; }
  std::string describe() const override;
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return vocab_ * dim_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override { return {{vocab_, dim_}}; }
  void bind(float* params, float* grads) override;
  // N(0, 1), torch.nn.Embedding's default.
  void init_params(Rng& rng, Backend& backend) override;
  // A lookup: no multiply-adds.
  int64_t flops_per_sample() const override { return 0; }
  // Throws InputError naming the layer, the position and the value of an id that is not an
  // integer in [0, vocab).
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  // dx, if asked for, is zero: ids are not differentiable.
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return dim_; }

 private:
  int64_t vocab_, dim_, time_ = 0;
  float *table_ = nullptr, *dtable_ = nullptr;
};

// [time, dim] -> [time, dim]: x + P[0:time], P a learned [max_len, dim] table (GPT-2's
// learned positions). Rows of P past `time` get a zero gradient.
class PositionEmbedding final : public Layer {
 public:
  PositionEmbedding(int64_t max_len, int64_t dim);
  std::string kind() const override { return "PositionEmbedding"; }
  std::string describe() const override;
  // ConfigError for an input that is not [time, dim] or has time > max_len.
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return max_len_ * dim_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override { return {{max_len_, dim_}}; }
  void bind(float* params, float* grads) override;
  // N(0, 1), as torch.nn.Embedding.
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return time_ * dim_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t max_len_, dim_, time_ = 0;
  float *table_ = nullptr, *dtable_ = nullptr;
};

// [time, dim] -> [count + time, dim]: `count` learned rows, then the input (ViT's class token,
// torch.cat([class_token.expand(batch, -1, -1), x], dim=1)). The rows' gradient is dy's first
// `count` rows summed over the batch.
class ClassToken final : public Layer {
 public:
  ClassToken(int64_t count, int64_t dim);
  std::string kind() const override { return "ClassToken"; }
  std::string describe() const override;
  // ConfigError for an input that is not [time, dim].
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return count_ * dim_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override { return {{count_, dim_}}; }
  std::vector<TensorSpec> param_tensors() const override {
    return {{"class_token", {1, count_, dim_}}};  // torchvision's name and shape
  }
  void bind(float* params, float* grads) override;
  // Zeros, as torchvision's VisionTransformer starts its class token.
  void init_params(Rng& rng, Backend& backend) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  int64_t count() const { return count_; }
  int64_t dim() const { return dim_; }

 private:
  // The rows for every sample of the batch, [batch, count * dim]: copied into y's strided
  // slots in forward, gathered from dy's in backward, with the backends' row copies.
  void ensure_tiles(Backend& backend, int64_t batch);
  int64_t count_, dim_, time_ = 0;
  float *table_ = nullptr, *dtable_ = nullptr;
  DeviceBuffer<float> tiles_;
};

}  // namespace loom::nn
