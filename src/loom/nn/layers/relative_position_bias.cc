#include "loom/nn/layers/relative_position_bias.h"

#include <cmath>

#include "loom/core/error.h"

namespace loom::nn {

RelativePositionBias::RelativePositionBias(int64_t window, int64_t heads)
    : window_(window), heads_(heads) {
  if (window_ < 1 || window_ > 256 || heads_ < 1 || heads_ > 4096)
    throw ConfigError(
        fmt::format("RelativePositionBias(window {}, heads {}): window must be in "
                    "[1, 256] and heads in [1, 4096]",
                    window_, heads_));
}

std::string RelativePositionBias::describe() const {
  return fmt::format("RelativePositionBias(window {}, heads {})", window_, heads_);
}

Shape RelativePositionBias::build(const Shape& input) {
  const int64_t n = window_ * window_;
  const size_t r = input.size();
  if (r < 3 || input[r - 3] != heads_ || input[r - 2] != n || input[r - 1] != n)
    throw ConfigError(
        fmt::format("{}: input {} does not end in [{}, {}, {}] (heads, and the "
                    "window's positions twice)",
                    describe(), shape_text(input), heads_, n, n));
  rows_ = numel(input) / block();
  return input;
}

void RelativePositionBias::bind(float* params, float* grads) {
  table_ = params;
  dtable_ = grads;
}

void RelativePositionBias::init_params(Rng& rng, Backend& backend) {
  std::vector<float> host(static_cast<size_t>(num_params()));
  for (float& v : host) {
    float z = rng.normal();
    while (std::fabs(z) > 2.0f) z = rng.normal();
    v = 0.02f * z;
  }
  backend.copy_to_device(table_, host.data(), host.size() * sizeof(float));
}

void RelativePositionBias::ensure_buffers(Backend& backend) {
  if (int64_t(ids_.size()) == block()) return;
  const int64_t n = window_ * window_;
  std::vector<float> ids(static_cast<size_t>(block()));
  for (int64_t h = 0; h < heads_; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        ids[size_t((h * n + i) * n + j)] = float(table_row(window_, i, j) * heads_ + h);
  ids_ = DeviceBuffer<float>(backend, block());
  backend.copy_to_device(ids_.data(), ids.data(), ids.size() * sizeof(float));
  bias_ = DeviceBuffer<float>(backend, block());
}

void RelativePositionBias::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  ensure_buffers(be);
  // The table as [rows * heads] entries of width 1: the block is a gather of them.
  be.embedding_forward(ids_.data(), table_, block(), num_params(), 1, bias_.data());
  if (y != x) be.copy(y, x, size_t(batch * rows_ * block()) * sizeof(float));
  be.add_bias(y, bias_.data(), batch * rows_, block());
}

void RelativePositionBias::backward(const Context& ctx, const float* x, const float* y,
                                    const float* dy, float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  ensure_buffers(be);
  be.sum_rows(dy, bias_.data(), batch * rows_, block());
  be.embedding_backward(ids_.data(), bias_.data(), block(), num_params(), 1, dtable_);
  if (dx) be.copy(dx, dy, size_t(batch * rows_ * block()) * sizeof(float));
}

}  // namespace loom::nn
