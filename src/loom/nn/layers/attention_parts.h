// The pieces an attention written out op by op is made of, as torch.onnx exports a hand-written
// one (q @ k^T * scale, a causal mask, softmax, @ v): MatMul (the product of two activations,
// batched over their leading axes), Softmax over the last axis (causal: the square [t, t]
// blocks of attention scores, row i seeing entries 0..i) and Scale (times a constant). loom's
// own `attention` layer fuses all of this; these let an imported graph run as it was written.
#pragma once

#include <algorithm>

#include "loom/nn/layers/layer.h"

namespace loom::nn {

// [..., M, K] x [..., K, N] -> [..., M, N]; the leading axes of both inputs are equal.
class MatMul final : public Layer {
 public:
  // [..., M, N] for inputs [..., M, K] and [..., K, N], or empty if they do not multiply so.
  // Inline: the ONNX importer's fuzz harness uses it without linking the layers.
  static Shape output_shape(const Shape& a, const Shape& b) {
    const size_t r = a.size();
    if (r < 2 || b.size() != r || a[r - 1] != b[r - 2] ||
        !std::equal(a.begin(), a.end() - 2, b.begin()))
      return {};
    Shape out = a;
    out[r - 1] = b[r - 1];
    return out;
  }
  std::string kind() const override { return "MatMul"; }
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 2; }
  Shape build(const Shape& input) override;
  Shape build_inputs(const std::vector<Shape>& inputs) override;
  int64_t flops_per_sample() const override { return 2 * count_ * m_ * n_ * k_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  void forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                      int64_t batch) override;
  void backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float* y,
                       const float* dy, const std::vector<float*>& dxs, int64_t batch) override;

 private:
  int64_t count_ = 1;  // per sample: the product of the leading axes
  int64_t m_ = 0, n_ = 0, k_ = 0;
};

class Softmax final : public Layer {
 public:
  explicit Softmax(bool causal = false) : causal_(causal) {}
  std::string kind() const override { return "Softmax"; }
  std::string describe() const override;
  bool causal() const { return causal_; }
  Shape build(const Shape& input) override;
  int64_t flops_per_sample() const override { return 4 * rows_ * cols_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  bool causal_;
  int64_t rows_ = 0, cols_ = 0;  // per sample
};

class Scale final : public Layer {
 public:
  explicit Scale(float factor) : factor_(factor) {}
  std::string kind() const override { return "Scale"; }
  std::string describe() const override;
  float factor() const { return factor_; }
  Shape build(const Shape& input) override;
  int64_t flops_per_sample() const override { return features_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  float factor_;
  int64_t features_ = 0;
};

}  // namespace loom::nn
