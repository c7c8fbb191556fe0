// 2-D convolution over NCHW images, as PyTorch's nn.Conv2d: rectangular kernel, stride,
// zero padding and dilation, channel groups, optional bias. Computes through the Backend's
// conv2d ops (oneDNN on the CPU). Weights are [out, in / groups, kernel_h, kernel_w] row-major,
// then the bias [out], as PyTorch stores them.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/nn/layers/pool2d.h"  // MaxPool2d lived here; the zoo's includes still find it

namespace loom::nn {

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  bool bias = true;
};

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  // Square kernel, stride and padding, with bias.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
         int64_t pad = 0);
  std::string kind() const override { return "Conv2d"; }
  bool backward_reads_output() const override { return false; }  // x, the weights and dy
  std::string describe() const override;
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return weight_count() + (o_.bias ? o_.out_channels : 0); }
  std::vector<std::array<int64_t, 2>> param_matrices() const override;
  std::vector<TensorSpec> param_tensors() const override;
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override {
    return 2 * weight_count() * geometry_.out_h * geometry_.out_w;
  }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  const Conv2dOptions& options() const { return o_; }

 private:
  int64_t fan_in() const { return o_.in_channels / o_.groups * o_.kernel_h * o_.kernel_w; }
  int64_t weight_count() const { return o_.out_channels * fan_in(); }
  ConvGeometry geometry(int64_t batch) const;

  Conv2dOptions o_;
  ConvGeometry geometry_;  // batch 0 until forward; the rest set by build
  float *wt_ = nullptr, *b_ = nullptr, *dwt_ = nullptr, *db_ = nullptr;
};

}  // namespace loom::nn
