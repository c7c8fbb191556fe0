// A model: a graph of layers (graph_builder.h) whose parameters live in one flat buffer and
// gradients in another; each layer holds views into them (docs/architecture.md, "One flat
// buffer"). Non-trained state (BatchNorm's running statistics) lives in a third. Activations are
// kept per layer for backward; gradients of activations share a few buffers, each live only
// between the backward of a layer's last reader and its own. Buffers grow to the largest batch
// seen and are then reused.
//
// In place: a layer that may write its output over its (first) input (Layer::runs_in_place: ReLU,
// Add) shares that input's buffer where it is the input's only reader and the input's layer does
// not read its own output in backward (Layer::backward_reads_output: BatchNorm, Conv2d, Linear
// and Add do not). So a ResNet's residual Add writes over its BatchNorm's output, its ReLUs over
// their BatchNorm's or Add's, and an MLP's ReLU over its Linear's: into a buffer the cache still
// holds instead of a fresh one, as PyTorch's inplace=True ReLU and in-place residual add do; the
// values are the same.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

// Where one layer's parameters sit in the flat buffer.
struct ParamRange {
  int layer = 0;  // node index
  int64_t offset = 0;
  int64_t count = 0;
};

struct StepInfo {
  bool training = true;
  uint64_t dropout_key = 0;   // derive per step: derive_key(seed, 0, kDropout, step)
  int64_t sample_offset = 0;  // global index of this batch's first sample
};

// What the model is trained to minimise (`loss.type`): softmax cross-entropy against class
// labels, or mean squared error against float targets (regression).
enum class LossKind { kCrossEntropy, kMse };
const char* loss_kind_name(LossKind k);  // "cross_entropy", "mse"

struct LossResult {
  double loss_sum = 0;  // summed over the batch's counted labels
  int64_t correct = 0;
  int64_t counted = 0;  // labels that counted: all of them, less those equal to the ignore index
};

class Model {
 public:
  // nodes: each after its inputs (build_nodes gives them so). The output is the last node;
  // its last dimension must be num_classes.
  Model(Backend& backend, Shape input_shape, int num_classes, std::vector<Node> nodes);
  // A chain: each layer reads the one before.
  Model(Backend& backend, Shape input_shape, int num_classes,
        std::vector<std::unique_ptr<Layer>> layers);
  // Without parameter and gradient buffers: the layers built, with their shapes, names, tensors
  // and sizes, which name a network's tensors in a file at no cost of its size (the trainer's
  // layout of a 630M-parameter network would hold 5 GB). The layers stay unbound: forward,
  // init_params and params() are not for such a model.
  struct StructureOnly {};
  Model(Backend& backend, Shape input_shape, int num_classes, std::vector<Node> nodes,
        StructureOnly);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  Backend& backend() { return *backend_; }
  const Shape& input_shape() const { return input_shape_; }
  int num_classes() const { return num_classes_; }
  int64_t num_params() const { return num_params_; }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  const std::vector<ParamRange>& param_ranges() const { return ranges_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::string& layer_name(int i) const { return names_[size_t(i)]; }
  const std::vector<int>& layer_inputs(int i) const { return inputs_[size_t(i)]; }
  const Shape& output_shape(int i) const { return out_shapes_[size_t(i)]; }
  // Index of the layer named `name`, or -1.
  int find_layer(const std::string& name) const;
  // Non-trained state: what checkpoints hold besides parameters and optimizer state.
  int64_t num_state() const { return state_.size(); }
  float* state() { return state_.data(); }
  // For layers that combine statistics across replicas (BatchNorm with sync); null: none.
  void set_reducer(ReplicaReducer* reducer) { reducer_ = reducer; }
  bool reduces_across_replicas() const;
  int64_t flops_per_sample() const;  // forward
  int64_t activation_floats_per_sample() const;
  // One line per layer: name, type, inputs, output shape, parameters, forward FLOPs.
  std::string summary() const;

  // Parameters drawn from Rng(seed, 0, kInit, layer index): identical on every rank. Layers
  // whose node came with initial parameters (an imported model) take those instead.
  void init_params(uint64_t seed);
  // Frees the nodes' initial parameters, for a model that will not call init_params (again): an
  // imported network's weights are as large as its parameters. A later init_params draws every
  // layer's.
  void release_initial_params() { std::vector<std::vector<float>>().swap(init_params_); }

  // x: [batch, numel(input_shape)] in backend memory. Returns the output, [batch, positions,
  // num_classes] with positions = output_positions() (1 unless the output has a sequence axis).
  const float* forward(const float* x, int64_t batch, const StepInfo& step);
  int64_t output_positions() const { return output_positions_; }
  // PyTorch's label smoothing of the cross-entropy targets: (1 - eps) onehot + eps / classes.
  void set_label_smoothing(float eps) { label_smoothing_ = eps; }
  // Labels equal to `label` (padding tokens of a sequence, say -1) then count for nothing in
  // loss(): no loss, no correct prediction, a zero gradient. Any other label outside the
  // classes stays an error.
  void set_ignore_index(int32_t label) {
    ignore_index_ = label;
    has_ignore_index_ = true;
  }
  void clear_ignore_index() { has_ignore_index_ = false; }
  bool has_ignore_index() const { return has_ignore_index_; }
  int32_t ignore_index() const { return ignore_index_; }
  // Softmax cross-entropy of the last forward, one label per output position; fills the
  // logits' gradient scaled by grad_scale.
  LossResult loss(const int32_t* labels, float grad_scale);
  // Mean squared error of the last forward against float targets, num_classes values per
  // output position (regression): loss_sum is the sum over rows of each row's mean squared
  // error; fills the outputs' gradient scaled by grad_scale. `correct` stays 0.
  LossResult mse_loss(const float* targets, float grad_scale);
  void set_loss_kind(LossKind k) { loss_kind_ = k; }
  LossKind loss_kind() const { return loss_kind_; }
  // The model's loss of the last forward: cross-entropy against `labels`, or the mean squared
  // error against `targets` (the other may be null).
  LossResult loss(const int32_t* labels, const float* targets, float grad_scale);
  // loss(), with the gradient of the mean over the counted labels instead of the sum: the
  // logits' gradient is scaled by grad_scale / counted (zero when nothing counted). loss_sum
  // stays the sum; loss_sum / counted is the mean.
  LossResult loss_mean_over_counted(const int32_t* labels, float grad_scale);
  // Backward of the last forward from the loss gradient. After each layer with parameters has
  // written its gradients, on_ready(range) is called: ranges arrive in reverse layer order,
  // which is what lets bucketed allreduce overlap with the rest of backward.
  void backward(const std::function<void(const ParamRange&)>& on_ready = nullptr);

 private:
  void build(std::vector<Node> nodes, bool with_buffers);
  void ensure_capacity(int64_t batch);
  void plan_gradients();
  void plan_in_place();
  float* activation(int layer) { return activations_[size_t(buffer_of_[size_t(layer)])].data(); }
  float* model_output() { return activation(int(layers_.size()) - 1); }  // the last layer's output
  Context context(const StepInfo& step) const;

  Backend* backend_;
  Shape input_shape_;
  int num_classes_;
  int64_t output_positions_ = 1;
  float label_smoothing_ = 0;
  LossKind loss_kind_ = LossKind::kCrossEntropy;
  int32_t ignore_index_ = -1;
  bool has_ignore_index_ = false;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> names_;
  std::vector<std::vector<int>> inputs_;
  std::vector<Shape> out_shapes_;
  std::vector<ParamRange> ranges_;
  std::vector<std::vector<float>> init_params_;  // per layer, the node's (empty: drawn)
  std::vector<int> range_of_layer_;              // index into ranges_, or -1
  int64_t num_params_ = 0;
  DeviceBuffer<float> params_, grads_, state_;
  ReplicaReducer* reducer_ = nullptr;
  std::vector<DeviceBuffer<float>> activations_;  // output of each layer that has its own
  std::vector<int> buffer_of_;  // the layer whose buffer holds each layer's output (in place)
  // Backward: layers that run (some layer at or below them has parameters), the gradient slot
  // of each layer's output (-1: none), the slots' per-sample sizes, and one spare for layers
  // whose output has several readers (their input gradients are summed).
  std::vector<bool> runs_backward_;
  std::vector<int> grad_slot_;
  std::vector<int64_t> slot_floats_;
  std::vector<DeviceBuffer<float>> slots_;
  DeviceBuffer<float> sum_spare_;
  int64_t sum_spare_floats_ = 0;
  int64_t capacity_ = 0;
  const float* last_input_ = nullptr;
  int64_t last_batch_ = 0;
  StepInfo last_step_;
};

}  // namespace loom::nn
