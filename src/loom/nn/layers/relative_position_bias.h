// The learned relative position bias of window attention (Swin, Liu et al. 2021, eq. 4;
// MaxViT, Tu et al. 2022): a table of (2w - 1)^2 rows, one column per head, and the attention
// scores [..., heads, w*w, w*w] of a w x w window get, at (h, i, j), the table's entry for the
// offset between positions i and j: row (di + w - 1) * (2w - 1) + (dj + w - 1), column h, with
// (di, dj) the row and column offsets of i from j. Index and table as torchvision writes them
// (relative_position_index, relative_position_bias_table), so an imported table keeps its
// meaning.
#pragma once

#include <vector>

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class RelativePositionBias final : public Layer {
 public:
  RelativePositionBias(int64_t window, int64_t heads);
  std::string kind() const override { return "RelativePositionBias"; }
  std::string describe() const override;
  // ConfigError for an input whose last three axes are not [heads, w*w, w*w].
  Shape build(const Shape& input) override;
  int64_t num_params() const override { return table_rows() * heads_; }
  std::vector<std::array<int64_t, 2>> param_matrices() const override {
    return {{table_rows(), heads_}};
  }
  std::vector<TensorSpec> param_tensors() const override {
    return {{"relative_position_bias_table", {table_rows(), heads_}}};  // torchvision's name
  }
  void bind(float* params, float* grads) override;
  // N(0, 0.02) truncated to two deviations, as torchvision's Swin and MaxViT start the table.
  void init_params(Rng& rng, Backend& backend) override;
  int64_t flops_per_sample() const override { return rows_ * block(); }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  int64_t window() const { return window_; }
  int64_t heads() const { return heads_; }
  int64_t table_rows() const { return (2 * window_ - 1) * (2 * window_ - 1); }
  // The table row for scores entry (i, j) of a window: the formula above. Inline: the ONNX
  // importer's fuzz harness checks an imported index with it without linking the layers.
  static int64_t table_row(int64_t window, int64_t i, int64_t j) {
    const int64_t di = i / window - j / window, dj = i % window - j % window;
    return (di + window - 1) * (2 * window - 1) + (dj + window - 1);
  }

 private:
  int64_t block() const { return heads_ * window_ * window_ * window_ * window_; }
  // The bias block's entries as indices into the flat table (floats, as the backends' gather
  // takes them), on the device, and the block itself.
  void ensure_buffers(Backend& backend);
  int64_t window_, heads_, rows_ = 0;  // rows_: bias blocks per sample
  float *table_ = nullptr, *dtable_ = nullptr;
  DeviceBuffer<float> ids_, bias_;
};

}  // namespace loom::nn
