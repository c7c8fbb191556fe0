// Zeros before and after the values of each per-sample axis: [3, 5] padded by before = [0, 1],
// after = [0, 2] is [3, 8]. What an imported Pad of an activation is when no convolution or pool
// takes it as its own padding (Swin pads its channels-last [H, W, C] map to whole windows).
#pragma once

#include <vector>

#include "loom/nn/layers/layer.h"

namespace loom::nn {

class Pad final : public Layer {
 public:
  Pad(std::vector<int64_t> before, std::vector<int64_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  std::string kind() const override { return "Pad"; }
  std::string describe() const override;
  const std::vector<int64_t>& before() const { return before_; }
  const std::vector<int64_t>& after() const { return after_; }
  // ConfigError unless before and after have one entry per axis, none negative.
  Shape build(const Shape& input) override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

 private:
  // Calls copy(in_offset, out_offset) for each block of rows the input's values form in the
  // output: rows_ rows (axis last_ - 1) of run_ floats, in_row_ apart in the input and out_row_
  // in the output.
  template <typename Copy>
  void for_each_block(int64_t batch, Copy&& copy) const;
  std::vector<int64_t> before_, after_;
  Shape in_, out_;
  int64_t last_ = 0;    // the innermost padded axis: its values and the axes after are a run
  int64_t blocks_ = 0;  // per sample: every index of the axes before last_ - 1
  int64_t rows_ = 1, run_ = 0, in_row_ = 0, out_row_ = 0, lead_ = 0;
};

}  // namespace loom::nn
