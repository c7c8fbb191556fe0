#include "loom/nn/layers/shape_ops.h"

#include <fmt/format.h>

#include "loom/core/error.h"

namespace loom::nn {

std::string Reshape::describe() const {
  return fmt::format("Reshape({})", shape_text(shape_));
}

Shape Reshape::build(const Shape& input) {
  for (int64_t d : shape_)
    if (d < 1)
      throw ConfigError(
          fmt::format("Reshape: shape {} has a dimension below 1", shape_text(shape_)));
  if (shape_.empty() || numel(shape_) != numel(input))
    throw ConfigError(fmt::format("Reshape: input {} ({} values) cannot become {} ({} values)",
                                  shape_text(input), numel(input), shape_text(shape_),
                                  shape_.empty() ? 0 : numel(shape_)));
  features_ = numel(input);
  return shape_;
}

void Reshape::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->copy(y, x, size_t(batch * features_) * sizeof(float));
}

void Reshape::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                       int64_t batch) {
  if (dx) ctx.backend->copy(dx, dy, size_t(batch * features_) * sizeof(float));
}

std::string Transpose::describe() const {
  return fmt::format("Transpose({})", shape_text(perm_));
}

Shape Transpose::build(const Shape& input) {
  const int rank = int(input.size());
  if (int(perm_.size()) != rank || rank > Permutation::kMaxRank)
    throw ConfigError(fmt::format("Transpose: perm {} does not fit the input {} (rank at most {})",
                                  shape_text(perm_), shape_text(input), Permutation::kMaxRank));
  std::vector<bool> seen(size_t(rank), false);
  Shape out;
  forward_.rank = backward_.rank = rank;
  for (int i = 0; i < rank; ++i) {
    const int64_t a = perm_[size_t(i)];
    if (a < 0 || a >= rank || seen[size_t(a)])
      throw ConfigError(fmt::format("Transpose: perm {} is not an order of the axes 0..{}",
                                    shape_text(perm_), rank - 1));
    seen[size_t(a)] = true;
    out.push_back(input[size_t(a)]);
    forward_.dims[i] = input[size_t(i)];
    forward_.perm[i] = int(a);
    backward_.perm[a] = i;
  }
  for (int i = 0; i < rank; ++i) backward_.dims[i] = out[size_t(i)];
  return out;
}

void Transpose::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->permute(x, y, batch, forward_);
}

void Transpose::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                         int64_t batch) {
  if (dx) ctx.backend->permute(dy, dx, batch, backward_);
}

std::string Slice::describe() const {
  return fmt::format("Slice(axis={}, {}:{})", axis_, start_, end_);
}

Shape Slice::build(const Shape& input) {
  if (axis_ < 0 || axis_ >= int64_t(input.size()))
    throw ConfigError(
        fmt::format("Slice: axis {} is not an axis of the input {}", axis_, shape_text(input)));
  in_len_ = input[size_t(axis_)];
  if (start_ < 0 || start_ >= end_ || end_ > in_len_)
    throw ConfigError(fmt::format("Slice: [{}, {}) is not a non-empty range of axis {} (length {})",
                                  start_, end_, axis_, in_len_));
  outer_ = inner_ = 1;
  for (int64_t i = 0; i < axis_; ++i) outer_ *= input[size_t(i)];
  for (size_t i = size_t(axis_) + 1; i < input.size(); ++i) inner_ *= input[i];
  Shape out = input;
  out[size_t(axis_)] = end_ - start_;
  return out;
}

void Slice::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t piece = (end_ - start_) * inner_;
  ctx.backend->copy_rows(y, piece, x + start_ * inner_, in_len_ * inner_, batch * outer_, piece);
}

void Slice::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                     int64_t batch) {
  if (!dx) return;
  const int64_t piece = (end_ - start_) * inner_;
  ctx.backend->fill(dx, batch * outer_ * in_len_ * inner_, 0.0f);
  ctx.backend->copy_rows(dx + start_ * inner_, in_len_ * inner_, dy, piece, batch * outer_, piece);
}

}  // namespace loom::nn
