// Batch normalisation as PyTorch's BatchNorm1d ([C] or [C, L] per sample) and BatchNorm2d
// ([C, H, W]): per-channel statistics over the batch (and L, or H and W) in training, the
// running statistics in evaluation. Parameters gamma (1) then beta (0); state running_mean (0)
// then running_var (1), updated in training by running = (1 - momentum) running + momentum
// batch, with the unbiased batch variance.
//
// With sync = true and a Context::reducer, the statistics and the two backward sums are summed
// over the replicas, so every replica normalises by the global batch (SyncBatchNorm). The
// parameter gradients stay per replica: the sync strategy sums them as it sums every gradient.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(int64_t channels, float eps = 1e-5f, float momentum = 0.1f, bool sync = false);
  // "BatchNorm1d" or "BatchNorm2d" once built (by the input rank); "BatchNorm" before.
  std::string kind() const override;
  std::string describe() const override;
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return 2 * channels_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override {
    return {{1, channels_}, {1, channels_}};  // gamma, then beta
  }
  // PyTorch's names: gamma is "weight", beta "bias".
  std::vector<TensorSpec> param_tensors() const override {
    return {{"weight", {channels_}}, {"bias", {channels_}}};
  }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return 4 * channels_ * plane_; }
  int64_t num_state() const override { return 2 * channels_; }
  bool reduces_across_replicas() const override { return sync_; }
  bool backward_reads_output() const override { return false; }  // x and the batch statistics
  std::vector<TensorSpec> state_tensors() const override {
    return {{"running_mean", {channels_}}, {"running_var", {channels_}}};
  }
  void bind_state(float* state) override;
  void init_state(Backend& backend) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;
  int64_t channels() const { return channels_; }
  float eps() const { return eps_; }
  float momentum() const { return momentum_; }

 private:
  bool syncing(const Context& ctx) const { return sync_ && ctx.reducer != nullptr; }
  // Batch statistics, running statistics and y (count_, mean_, var_ and scratch_ set).
  void train_forward(const Context& ctx, const float* x, float* y, int64_t batch);
  void check_count() const;
  void update_running(Backend& be, const float* sumsq);

  int64_t channels_;
  float eps_, momentum_;
  bool sync_;
  int rank_ = 0;       // of the per-sample input, once built
  int64_t plane_ = 0;  // values per channel per sample
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr;
  // Of the last training forward: the batch mean and (biased) variance, and the number of
  // values per channel they cover (over every replica when syncing).
  DeviceBuffer<float> mean_, var_;
  double count_ = 0;
  DeviceBuffer<float> scratch_;  // C + 1 floats: per-channel sums, then the count
};

}  // namespace loom::nn
