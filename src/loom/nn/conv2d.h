// 2-D convolution over NCHW images by im2col + GEMM; square kernel, stride, zero padding.
// Weights are [out_channels, in_channels * k * k] row-major, as PyTorch stores them.
#pragma once

#include "loom/nn/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class Conv2d final : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
         int64_t pad = 0);
  std::string kind() const override { return "Conv2d"; }
  std::string describe() const override;
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return out_c_ * in_c_ * k_ * k_ + out_c_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override {
    return {{out_c_, in_c_ * k_ * k_}, {1, out_c_}};  // weights, then bias
  }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return 2 * out_c_ * in_c_ * k_ * k_ * oh_ * ow_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t in_c_, out_c_, k_, stride_, pad_;
  int64_t h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
  float *wt_ = nullptr, *b_ = nullptr, *dwt_ = nullptr, *db_ = nullptr;
  DeviceBuffer<float> columns_;  // [in_c * k * k, oh * ow], one image at a time
};

class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int64_t size);
  std::string kind() const override { return "MaxPool2d"; }
  std::string describe() const override;
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t size_;
  int64_t c_ = 0, h_ = 0, w_ = 0;
  DeviceBuffer<int32_t> argmax_;
};

}  // namespace loom::nn
