// Layer normalisation over the last axis (Ba et al. 2016; torch.nn.LayerNorm over the last
// dimension): each row of `features` values is normalised with its own mean and variance, then
// scaled by a learned gain and shifted by a learned bias. The statistics are per sample, so
// training and evaluation compute the same thing and replicas need not agree on anything.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(float eps = 1e-5f);
  std::string kind() const override { return "LayerNorm"; }
  std::string describe() const override;
  // Any shape; the last axis is normalised, the others are rows.
  Shape build(const Shape& input) override;
  // gamma [features] (ones), then beta [features] (zeros).
  int64_t num_params() const override { return 2 * features_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override {
    return {{1, features_}, {1, features_}};
  }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  // Mean, variance, normalise, scale and shift: about 8 operations per value.
  int64_t flops_per_sample() const override { return 8 * rows_ * features_; }
  int64_t saved_floats_per_sample() const override { return 2 * rows_; }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  float eps() const { return eps_; }

 private:
  float eps_;
  int64_t rows_ = 0, features_ = 0;  // per sample
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  DeviceBuffer<float> mean_, rstd_;  // of the last forward, grown to the largest batch
};

}  // namespace loom::nn
