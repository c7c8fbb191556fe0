// Layers that join branches of a graph: Add (elementwise sum of inputs of one shape, the
// residual connection), Mul (elementwise product, one input broadcast over trailing axes:
// squeeze-and-excitation's channel gates) and Concat (along one per-sample axis, channels for
// images).
#pragma once

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class Add final : public Layer {
 public:
  std::string kind() const override { return "Add"; }
  bool backward_reads_output() const override { return false; }  // dy alone
  bool runs_in_place() const override { return true; }  // y = x0 + ..., x0's buffer may be y
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 64; }
  Shape build(const Shape& input) override;
  Shape build_inputs(const std::vector<Shape>& inputs) override;
  int64_t flops_per_sample() const override { return (arity_ - 1) * features_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  void forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                      int64_t batch) override;
  void backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float* y,
                       const float* dy, const std::vector<float*>& dxs, int64_t batch) override;

 private:
  int64_t features_ = 0;
  int64_t arity_ = 0;
};

// The product of two inputs. They have one shape, or one of them (the gate) has 1s where the
// other's trailing axes are: [C, 1, 1] times [C, H, W] scales each channel plane.
class Mul final : public Layer {
 public:
  // The output's shape for inputs of shapes a and b (the larger of them), or empty if they
  // neither match nor broadcast so. Inline: the ONNX importer's fuzz harness uses it without
  // linking the layers.
  static Shape output_shape(const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return {};
    int64_t na = 1, nb = 1;
    for (size_t i = 0; i < a.size(); ++i) na *= a[i], nb *= b[i];
    const Shape& big = nb <= na ? a : b;
    const Shape& gate = nb <= na ? b : a;
    // The gate matches a leading run of the other's axes and is 1 on the rest.
    size_t k = 0;
    while (k < gate.size() && gate[k] == big[k]) ++k;
    for (size_t i = k; i < gate.size(); ++i)
      if (gate[i] != 1) return {};
    return big;
  }
  std::string kind() const override { return "Mul"; }
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 2; }
  Shape build(const Shape& input) override;
  Shape build_inputs(const std::vector<Shape>& inputs) override;
  int64_t flops_per_sample() const override { return rows_ * cols_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  void forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                      int64_t batch) override;
  void backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float* y,
                       const float* dy, const std::vector<float*>& dxs, int64_t batch) override;

 private:
  int gate_ = 1;      // which input is broadcast (the other is as large as the output)
  int64_t rows_ = 0;  // per sample: the gate's size
  int64_t cols_ = 0;  // what each gate value multiplies
};

// axis counts per-sample dimensions: 0 is channels for [C, H, W] and features for [F].
class Concat final : public Layer {
 public:
  explicit Concat(int64_t axis = 0) : axis_(axis) {}
  std::string kind() const override { return "Concat"; }
  std::string describe() const override;
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 64; }
  Shape build(const Shape& input) override;
  Shape build_inputs(const std::vector<Shape>& inputs) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  void forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                      int64_t batch) override;
  void backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float* y,
                       const float* dy, const std::vector<float*>& dxs, int64_t batch) override;
  int64_t axis() const { return axis_; }

 private:
  int64_t axis_;
  int64_t outer_ = 1;            // per sample: product of the dimensions before the axis
  std::vector<int64_t> pieces_;  // per input: its axis length x the dimensions after it
  int64_t out_piece_ = 0;        // sum of pieces_
};

}  // namespace loom::nn
