// 2-D pooling over [C, H, W] images with PyTorch's semantics: rectangular window and stride,
// zero-free padding on every side (at most half the window), floor or ceil output size (a ceil
// window that would start in the right or bottom padding is dropped), and for average pooling
// a divisor that counts the padding or not.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

struct Pool2dOptions {
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool2d only
};

// The window arithmetic both pooling layers share.
class Pool2dBase : public Layer {
 public:
  Shape build(const Shape& input) override;
  const Pool2dOptions& options() const { return o_; }

 protected:
  Pool2dBase(const char* kind, const Pool2dOptions& options);
  PoolGeometry geometry(int64_t batch) const;
  std::string options_text() const;

  Pool2dOptions o_;
  PoolGeometry geometry_;  // planes = channels until geometry(batch)
};

class MaxPool2d final : public Pool2dBase {
 public:
  explicit MaxPool2d(const Pool2dOptions& options);
  explicit MaxPool2d(int64_t size);  // window = stride = size, no padding
  std::string kind() const override { return "MaxPool2d"; }
  std::string describe() const override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  DeviceBuffer<int32_t> argmax_;  // of the last forward, grown to the largest batch
};

class AvgPool2d final : public Pool2dBase {
 public:
  explicit AvgPool2d(const Pool2dOptions& options);
  std::string kind() const override { return "AvgPool2d"; }
  std::string describe() const override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
};

// [C, H, W] -> [C]: the mean of each channel (average pooling over the whole image).
// keep_dims: [C, 1, 1] instead of [C] (ONNX's GlobalAveragePool, squeeze-and-excitation).
class GlobalAvgPool2d final : public Layer {
 public:
  explicit GlobalAvgPool2d(bool keep_dims = false) : keep_dims_(keep_dims) {}
  std::string kind() const override { return "GlobalAvgPool2d"; }
  std::string describe() const override;
  bool keep_dims() const { return keep_dims_; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  PoolGeometry geometry(int64_t batch) const;
  bool keep_dims_;
  int64_t c_ = 0, h_ = 0, w_ = 0;
};

}  // namespace loom::nn
