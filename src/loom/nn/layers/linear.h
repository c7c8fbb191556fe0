// Fully connected layer: y = x W^T + b, W is [out, in] row-major (as PyTorch stores it). On an
// input [..., in] of rank 2 or more it acts on the last axis and the others are rows, as
// torch.nn.Linear does ([time, in] -> [time, out]); any other input with `in` values per sample
// is one row of them ([1, 28, 28] into Linear(784) -> [out]).
#pragma once

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class Linear final : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string kind() const override { return "Linear"; }
  bool backward_reads_output() const override { return false; }  // x, the weights and dy
  std::string describe() const override;
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return in_ * out_ + (bias_ ? out_ : 0); }
  std::vector<std::array<int64_t, 2>> param_matrices() const override {
    if (!bias_) return {{out_, in_}};
    return {{out_, in_}, {1, out_}};  // W [out, in], then b
  }
  std::vector<TensorSpec> param_tensors() const override {
    if (!bias_) return {{"weight", {out_, in_}}};
    return {{"weight", {out_, in_}}, {"bias", {out_}}};
  }
  void bind(float* params, float* grads) override;
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weights and bias.
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return 2 * rows_ * in_ * out_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool has_bias() const { return bias_; }

 private:
  int64_t in_, out_;
  bool bias_;
  int64_t rows_ = 1;  // per sample: the leading axes of a [..., in] input
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace loom::nn
