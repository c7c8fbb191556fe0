// A layer of a model graph (model.h). Layers hold views into the model's flat parameter and
// gradient buffers (docs/architecture.md, "One flat buffer") and compute through the Backend only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/rng.h"
#include "loom/tensor/backend.h"

namespace loom::nn {

using Shape = std::vector<int64_t>;  // per-sample shape, batch excluded
int64_t numel(const Shape& s);
std::string shape_text(const Shape& s);

// One named tensor of a layer's parameters or state: a piece of its flat range, in order, with
// the shape it has as a weight file's tensor ("weight" [out, in] of a Linear). Names and
// shapes follow PyTorch's modules, so a model file reads like a state_dict.
struct TensorSpec {
  std::string name;
  Shape shape;
};

// Sums across the data-parallel replicas, for a layer whose forward needs statistics of the
// global batch (BatchNorm with `sync = true`). The sync layer provides one; nn knows no
// communicator. Every replica calls sum() in the same order with the same n.
class ReplicaReducer {
 public:
  virtual ~ReplicaReducer() = default;
  virtual int replicas() const = 0;
  virtual void sum(float* x, int64_t n) = 0;  // in place, backend memory
};

struct Context {
  Backend* backend = nullptr;
  bool training = false;
  uint64_t dropout_key = 0;   // per step; layers mix in their index
  int64_t sample_offset = 0;  // global index of this batch's first sample (dropout streams)
  int layer_index = 0;
  ReplicaReducer* reducer = nullptr;  // null: one replica
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;
  virtual std::string describe() const { return kind(); }

  // Called once, with the per-sample input shape; returns the per-sample output shape.
  // Throws ConfigError for a shape the layer cannot take.
  virtual Shape build(const Shape& input) = 0;
  virtual int64_t num_params() const { return 0; }
  // How the parameters form matrices, end to end, as {rows, cols} (row-major), for codecs
  // that use the shape (PowerSGD). Default: one row of all of them.
  virtual std::vector<std::array<int64_t, 2>> param_matrices() const {
    if (num_params() == 0) return {};
    return {{1, num_params()}};
  }
  // The named tensors the num_params() parameters form, end to end in flat order (their sizes
  // add up to num_params()). Default: one tensor "params" of them all.
  virtual std::vector<TensorSpec> param_tensors() const {
    if (num_params() == 0) return {};
    return {{"params", {num_params()}}};
  }
  // Views into the model's flat buffers, num_params() floats each.
  virtual void bind(float* params, float* grads) {}
  virtual void init_params(Rng& rng, Backend& backend) {}
  // Forward multiply-adds x2 per sample (backward costs about twice this).
  virtual int64_t flops_per_sample() const { return 0; }
  // Floats per sample the layer keeps from forward for backward beyond its output (attention's
  // projections and probabilities, LayerNorm's row statistics): with the outputs, what a
  // batch's activations cost in memory (Model::activation_floats_per_sample).
  virtual int64_t saved_floats_per_sample() const { return 0; }

  // Non-trained state (BatchNorm's running statistics): a view into the model's flat state
  // buffer, num_state() floats, which checkpoints hold and replicas keep identical.
  virtual int64_t num_state() const { return 0; }
  // True if forward and backward call Context::reducer (BatchNorm with sync = true).
  virtual bool reduces_across_replicas() const { return false; }
  // Whether backward reads the layer's own output y (ReLU's mask does; the products' and
  // BatchNorm's gradients do not). Only a layer that does not may have its output overwritten
  // by a layer that runs in place after it.
  virtual bool backward_reads_output() const { return true; }
  // Whether forward may write y over its (first) input: an elementwise map whose backward reads
  // no input, only y and dy (ReLU, Add). The model runs it in place where it is that input's
  // only reader and the input's layer does not read its own output back (Model, "in place").
  virtual bool runs_in_place() const { return false; }
  // The named tensors of the num_state() values, as param_tensors() (default: one "state").
  virtual std::vector<TensorSpec> state_tensors() const {
    if (num_state() == 0) return {};
    return {{"state", {num_state()}}};
  }
  virtual void bind_state(float* state) {}
  virtual void init_state(Backend& backend) {}

  // Layers of several inputs (Add, Concat) override the *_inputs calls; the model calls only
  // those, and for one input they forward to build/forward/backward.
  virtual int min_inputs() const { return 1; }
  virtual int max_inputs() const { return 1; }
  virtual Shape build_inputs(const std::vector<Shape>& inputs) { return build(inputs.at(0)); }
  virtual void forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                              int64_t batch) {
    forward(ctx, xs.at(0), y, batch);
  }
  // dxs[i] may be null: input i needs no gradient.
  virtual void backward_inputs(const Context& ctx, const std::vector<const float*>& xs,
                               const float* y, const float* dy, const std::vector<float*>& dxs,
                               int64_t batch) {
    backward(ctx, xs.at(0), y, dy, dxs.at(0), batch);
  }

  virtual void forward(const Context& ctx, const float* x, float* y, int64_t batch) = 0;
  // dx may be null (no layer below has parameters, so no input gradient is needed). Parameter
  // gradients are overwritten, not accumulated.
  virtual void backward(const Context& ctx, const float* x, const float* y, const float* dy,
                        float* dx, int64_t batch) = 0;
};

}  // namespace loom::nn
