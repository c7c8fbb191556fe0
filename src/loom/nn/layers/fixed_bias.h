// x plus a fixed tensor of the per-sample shape, the same for every sample and never learned: an
// imported network's constant addend, such as Swin's shifted-window attention mask (-100 where a
// query and a key come from different regions of the rolled map, 0 elsewhere; Liu et al. 2021,
// section 3.2). The tensor is the layer's state (a checkpoint holds it, an export writes it
// back); a graph file that does not import it gets zeros.
#pragma once

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class FixedBias final : public Layer {
 public:
  std::string kind() const override { return "FixedBias"; }
  Shape build(const Shape& input) override;
  int64_t num_state() const override { return numel(shape_); }
  std::vector<TensorSpec> state_tensors() const override { return {{"bias", shape_}}; }
  void bind_state(float* state) override { bias_ = state; }
  void init_state(Backend& backend) override;
  int64_t flops_per_sample() const override { return numel(shape_); }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  Shape shape_;
  float* bias_ = nullptr;
};

}  // namespace loom::nn
