// Elementwise activations beyond ReLU, each one Backend::activation_forward/backward kind:
// LeakyReLU, GELU (exact erf form), SiLU, Tanh, Sigmoid, ReLU6, Hardsigmoid, Hardswish. ReLU
// keeps its own ops (activation.h).
#pragma once

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class PointwiseActivation : public Layer {
 public:
  std::string kind() const override { return activation_name(kind_); }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 protected:
  PointwiseActivation(Activation kind, float alpha) : kind_(kind), alpha_(alpha) {}
  Activation kind_;
  float alpha_;
  int64_t features_ = 0;
};

class LeakyReLU final : public PointwiseActivation {
 public:
  explicit LeakyReLU(float slope = 0.01f);
  std::string describe() const override;
  float slope() const { return alpha_; }
};

class GELU final : public PointwiseActivation {
 public:
  GELU() : PointwiseActivation(Activation::kGelu, 0.0f) {}
};

class SiLU final : public PointwiseActivation {
 public:
  SiLU() : PointwiseActivation(Activation::kSilu, 0.0f) {}
};

class Tanh final : public PointwiseActivation {
 public:
  Tanh() : PointwiseActivation(Activation::kTanh, 0.0f) {}
};

class Sigmoid final : public PointwiseActivation {
 public:
  Sigmoid() : PointwiseActivation(Activation::kSigmoid, 0.0f) {}
};

// min(max(x, 0), 6): MobileNets' activation (ONNX: Clip with min 0 and max 6).
class ReLU6 final : public PointwiseActivation {
 public:
  ReLU6() : PointwiseActivation(Activation::kRelu6, 0.0f) {}
};

// min(max(x / 6 + 1/2, 0), 1), PyTorch's Hardsigmoid (ONNX: HardSigmoid, alpha 1/6, beta 1/2).
class HardSigmoid final : public PointwiseActivation {
 public:
  HardSigmoid() : PointwiseActivation(Activation::kHardSigmoid, 0.0f) {}
};

// x times Hardsigmoid(x): MobileNetV3's activation (ONNX: HardSwish).
class HardSwish final : public PointwiseActivation {
 public:
  HardSwish() : PointwiseActivation(Activation::kHardSwish, 0.0f) {}
};

}  // namespace loom::nn
