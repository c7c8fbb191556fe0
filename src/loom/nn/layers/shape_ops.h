// Layers that move values without arithmetic: Reshape (a per-sample shape of the same size),
// Transpose (the per-sample axes in another order) and Slice (a range of one per-sample axis).
// They make the shape arithmetic of imported graphs (ShuffleNet's channel shuffle, a split
// into branches, attention's heads) layers of their own; the batch axis is never moved.
#pragma once

#include <vector>

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class Reshape final : public Layer {
 public:
  explicit Reshape(Shape shape) : shape_(std::move(shape)) {}
  std::string kind() const override { return "Reshape"; }
  std::string describe() const override;
  const Shape& shape() const { return shape_; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  Shape shape_;
  int64_t features_ = 0;
};

// perm[i]: the input axis that becomes axis i, counting per-sample axes from 0.
class Transpose final : public Layer {
 public:
  explicit Transpose(std::vector<int64_t> perm) : perm_(std::move(perm)) {}
  std::string kind() const override { return "Transpose"; }
  std::string describe() const override;
  const std::vector<int64_t>& perm() const { return perm_; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  std::vector<int64_t> perm_;
  Permutation forward_, backward_;  // of the input's axes; of the output's, back
};

// Elements [start, end) of per-sample axis `axis`.
class Slice final : public Layer {
 public:
  Slice(int64_t axis, int64_t start, int64_t end) : axis_(axis), start_(start), end_(end) {}
  std::string kind() const override { return "Slice"; }
  std::string describe() const override;
  int64_t axis() const { return axis_; }
  int64_t start() const { return start_; }
  int64_t end() const { return end_; }
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  int64_t axis_, start_, end_;
  int64_t outer_ = 1;  // per sample: the product of the axes before `axis`
  int64_t inner_ = 1;  // the product of the axes after it
  int64_t in_len_ = 0;
};

}  // namespace loom::nn
