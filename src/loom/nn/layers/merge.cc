#include "loom/nn/layers/merge.h"

#include "loom/core/error.h"

namespace loom::nn {

Shape Add::build(const Shape& input) {
  throw ConfigError(fmt::format("Add of one input {}: it needs two or more", shape_text(input)));
}

Shape Add::build_inputs(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2)
    throw ConfigError(fmt::format("Add takes two or more inputs, got {}", inputs.size()));
  for (size_t i = 1; i < inputs.size(); ++i)
    if (inputs[i] != inputs[0])
      throw ConfigError(fmt::format("Add: input {} has shape {} but input 0 has {}", i,
                                    shape_text(inputs[i]), shape_text(inputs[0])));
  features_ = numel(inputs[0]);
  arity_ = int64_t(inputs.size());
  return inputs[0];
}

void Add::forward(const Context&, const float*, float*, int64_t) {
  throw ConfigError("Add called with one input");
}

void Add::backward(const Context&, const float*, const float*, const float*, float*, int64_t) {
  throw ConfigError("Add called with one input");
}

void Add::forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                         int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t n = batch * features_;
  if (y != xs[0]) be.copy(y, xs[0], size_t(n) * sizeof(float));  // else in place (Model)
  for (size_t i = 1; i < xs.size(); ++i) be.axpy(n, 1.0f, xs[i], y);
}

void Add::backward_inputs(const Context& ctx, const std::vector<const float*>&, const float*,
                          const float* dy, const std::vector<float*>& dxs, int64_t batch) {
  for (float* dx : dxs)
    if (dx) ctx.backend->copy(dx, dy, size_t(batch * features_) * sizeof(float));
}

Shape Mul::build(const Shape& input) {
  throw ConfigError(fmt::format("Mul of one input {}: it needs two", shape_text(input)));
}

Shape Mul::build_inputs(const std::vector<Shape>& inputs) {
  if (inputs.size() != 2)
    throw ConfigError(fmt::format("Mul takes two inputs, got {}", inputs.size()));
  gate_ = numel(inputs[1]) <= numel(inputs[0]) ? 1 : 0;
  const Shape& big = inputs[size_t(1 - gate_)];
  const Shape& gate = inputs[size_t(gate_)];
  if (output_shape(inputs[0], inputs[1]).empty())
    throw ConfigError(
        fmt::format("Mul: inputs {} and {} neither have one shape nor does the "
                    "smaller broadcast over the other's trailing axes ([C, 1, 1] "
                    "with [C, H, W])",
                    shape_text(inputs[0]), shape_text(inputs[1])));
  rows_ = numel(gate);
  cols_ = numel(big) / rows_;
  return big;
}

void Mul::forward(const Context&, const float*, float*, int64_t) {
  throw ConfigError("Mul called with one input");
}

void Mul::backward(const Context&, const float*, const float*, const float*, float*, int64_t) {
  throw ConfigError("Mul called with one input");
}

void Mul::forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                         int64_t batch) {
  ctx.backend->scale_rows(xs[size_t(1 - gate_)], xs[size_t(gate_)], y, batch * rows_, cols_);
}

void Mul::backward_inputs(const Context& ctx, const std::vector<const float*>& xs, const float*,
                          const float* dy, const std::vector<float*>& dxs, int64_t batch) {
  const float* big = xs[size_t(1 - gate_)];
  const float* gate = xs[size_t(gate_)];
  if (float* d = dxs[size_t(1 - gate_)]) ctx.backend->scale_rows(dy, gate, d, batch * rows_, cols_);
  if (float* d = dxs[size_t(gate_)]) ctx.backend->row_dots(dy, big, d, batch * rows_, cols_);
}

std::string Concat::describe() const {
  return fmt::format("Concat(axis={})", axis_);
}

Shape Concat::build(const Shape& input) {
  throw ConfigError(fmt::format("Concat of one input {}: it needs two or more", shape_text(input)));
}

Shape Concat::build_inputs(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2)
    throw ConfigError(fmt::format("Concat takes two or more inputs, got {}", inputs.size()));
  const Shape& first = inputs[0];
  if (axis_ < 0 || axis_ >= int64_t(first.size()))
    throw ConfigError(fmt::format("Concat: axis {} is not an axis of the per-sample shape {}",
                                  axis_, shape_text(first)));
  Shape out = first;
  out[size_t(axis_)] = 0;
  pieces_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i];
    bool match = s.size() == first.size();
    for (size_t d = 0; match && d < s.size(); ++d) match = int64_t(d) == axis_ || s[d] == first[d];
    if (!match)
      throw ConfigError(
          fmt::format("Concat: input {} has shape {}, which differs from input 0's {} off axis {}",
                      i, shape_text(s), shape_text(first), axis_));
    out[size_t(axis_)] += s[size_t(axis_)];
    int64_t piece = 1;
    for (size_t d = size_t(axis_); d < s.size(); ++d) piece *= s[d];
    pieces_.push_back(piece);
  }
  outer_ = 1;
  for (size_t d = 0; d < size_t(axis_); ++d) outer_ *= first[d];
  out_piece_ = 0;
  for (int64_t p : pieces_) out_piece_ += p;
  return out;
}

void Concat::forward(const Context&, const float*, float*, int64_t) {
  throw ConfigError("Concat called with one input");
}

void Concat::backward(const Context&, const float*, const float*, const float*, float*, int64_t) {
  throw ConfigError("Concat called with one input");
}

void Concat::forward_inputs(const Context& ctx, const std::vector<const float*>& xs, float* y,
                            int64_t batch) {
  int64_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    ctx.backend->copy_rows(y + at, out_piece_, xs[i], pieces_[i], batch * outer_, pieces_[i]);
    at += pieces_[i];
  }
}

void Concat::backward_inputs(const Context& ctx, const std::vector<const float*>&, const float*,
                             const float* dy, const std::vector<float*>& dxs, int64_t batch) {
  int64_t at = 0;
  for (size_t i = 0; i < dxs.size(); ++i) {
    if (dxs[i])
      ctx.backend->copy_rows(dxs[i], pieces_[i], dy + at, out_piece_, batch * outer_, pieces_[i]);
    at += pieces_[i];
  }
}

}  // namespace loom::nn
