// A sequential model whose parameters live in one flat buffer and gradients in another; each
// layer holds views into them (docs/architecture.md, "One flat buffer"). Activations are kept per
// layer for backward; buffers grow to the largest batch seen and are then reused.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

// Where one layer's parameters sit in the flat buffer.
struct ParamRange {
  int layer = 0;
  int64_t offset = 0;
  int64_t count = 0;
};

struct StepInfo {
  bool training = true;
  uint64_t dropout_key = 0;   // derive per step: derive_key(seed, 0, kDropout, step)
  int64_t sample_offset = 0;  // global index of this batch's first sample
};

struct LossResult {
  double loss_sum = 0;  // summed over the batch
  int64_t correct = 0;
};

class Model {
 public:
  Model(Backend& backend, Shape input_shape, int num_classes,
        std::vector<std::unique_ptr<Layer>> layers);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  Backend& backend() { return *backend_; }
  const Shape& input_shape() const { return input_shape_; }
  int num_classes() const { return num_classes_; }
  int64_t num_params() const { return params_.size(); }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  const std::vector<ParamRange>& param_ranges() const { return ranges_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  int64_t flops_per_sample() const;  // forward
  int64_t activation_floats_per_sample() const;
  std::string summary() const;

  // Parameters drawn from Rng(seed, 0, kInit, layer index): identical on every rank.
  void init_params(uint64_t seed);

  // x: [batch, numel(input_shape)] in backend memory. Returns logits [batch, num_classes].
  const float* forward(const float* x, int64_t batch, const StepInfo& step);
  // Softmax cross-entropy of the last forward; fills the logits' gradient scaled by grad_scale.
  LossResult loss(const int32_t* labels, float grad_scale);
  // Backward of the last forward from the loss gradient. After each layer with parameters has
  // written its gradients, on_ready(range) is called: ranges arrive in reverse layer order,
  // which is what lets bucketed allreduce overlap with the rest of backward.
  void backward(const std::function<void(const ParamRange&)>& on_ready = nullptr);

 private:
  void ensure_capacity(int64_t batch);

  Backend* backend_;
  Shape input_shape_;
  int num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> out_shapes_;
  std::vector<ParamRange> ranges_;
  std::vector<int> range_of_layer_;  // index into ranges_, or -1
  DeviceBuffer<float> params_, grads_;
  std::vector<DeviceBuffer<float>> activations_;  // output of each layer
  DeviceBuffer<float> grad_a_, grad_b_, dlogits_;
  int64_t capacity_ = 0;
  const float* last_input_ = nullptr;
  int64_t last_batch_ = 0;
  StepInfo last_step_;
};

}  // namespace loom::nn
