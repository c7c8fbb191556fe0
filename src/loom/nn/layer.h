// A layer of a sequential model. Layers hold views into the model's flat parameter and gradient
// buffers (docs/architecture.md, "One flat buffer") and compute through the Backend only.
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

struct Context {
  Backend* backend = nullptr;
  bool training = false;
  uint64_t dropout_key = 0;   // per step; layers mix in their index
  int64_t sample_offset = 0;  // global index of this batch's first sample (dropout streams)
  int layer_index = 0;
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
  // Views into the model's flat buffers, num_params() floats each.
  virtual void bind(float* params, float* grads) {}
  virtual void init_params(Rng& rng, Backend& backend) {}
  // Forward multiply-adds x2 per sample (backward costs about twice this).
  virtual int64_t flops_per_sample() const { return 0; }

  virtual void forward(const Context& ctx, const float* x, float* y, int64_t batch) = 0;
  // dx may be null (no layer below has parameters, so no input gradient is needed). Parameter
  // gradients are overwritten, not accumulated.
  virtual void backward(const Context& ctx, const float* x, const float* y, const float* dy,
                        float* dx, int64_t batch) = 0;
};

}  // namespace loom::nn
