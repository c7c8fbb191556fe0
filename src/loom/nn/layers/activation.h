// Parameter-free layers: ReLU, Dropout, Flatten.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "ReLU"; }
  // Its backward reads only y and dy (the mask is y > 0).
  bool runs_in_place() const override { return true; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t features_ = 0;
};

// Inverted dropout with counter-based masks: sample s, feature f draws element
// (s * features + f) of the step's stream, so the mask of a sample does not depend on which
// worker holds it or on the batch split.
class Dropout final : public Layer {
 public:
  explicit Dropout(float p);
  std::string kind() const override { return "Dropout"; }
  std::string describe() const override;
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  float p() const { return p_; }

 private:
  float p_;
  int64_t features_ = 0;
  DeviceBuffer<uint8_t> mask_;  // keep mask of the last forward, grown to the largest batch
};

class Flatten final : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t features_ = 0;
};

}  // namespace loom::nn
