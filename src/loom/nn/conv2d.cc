#include "loom/nn/conv2d.h"

#include <cmath>
#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
               int64_t pad)
    : in_c_(in_channels), out_c_(out_channels), k_(kernel), stride_(stride), pad_(pad) {
  if (in_c_ <= 0 || out_c_ <= 0 || k_ <= 0 || stride_ <= 0 || pad_ < 0 || in_c_ > 65536 ||
      out_c_ > 65536 || k_ > 64)
    throw ConfigError(fmt::format("{}: sizes out of range", describe()));
}

std::string Conv2d::describe() const {
  return fmt::format("Conv2d({} -> {}, k={}, stride={}, pad={})", in_c_, out_c_, k_, stride_, pad_);
}

Shape Conv2d::build(const Shape& input) {
  if (input.size() != 3 || input[0] != in_c_)
    throw ConfigError(
        fmt::format("{}: input {} is not [{}, H, W]", describe(), shape_text(input), in_c_));
  h_ = input[1];
  w_ = input[2];
  if (h_ + 2 * pad_ < k_ || w_ + 2 * pad_ < k_)
    throw ConfigError(
        fmt::format("{}: kernel larger than padded input {}", describe(), shape_text(input)));
  oh_ = (h_ + 2 * pad_ - k_) / stride_ + 1;
  ow_ = (w_ + 2 * pad_ - k_) / stride_ + 1;
  return {out_c_, oh_, ow_};
}

void Conv2d::bind(float* params, float* grads) {
  wt_ = params;
  dwt_ = grads;
  b_ = params + out_c_ * in_c_ * k_ * k_;
  db_ = grads + out_c_ * in_c_ * k_ * k_;
}

void Conv2d::init_params(Rng& rng, Backend& backend) {
  const float bound = 1.0f / std::sqrt(float(in_c_ * k_ * k_));
  std::vector<float> host(static_cast<size_t>(num_params()));
  for (float& v : host) v = (2.0f * rng.uniform() - 1.0f) * bound;
  backend.copy_to_device(wt_, host.data(), host.size() * sizeof(float));
}

void Conv2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t rows = in_c_ * k_ * k_, cols = oh_ * ow_;
  if (columns_.size() < rows * cols) columns_ = DeviceBuffer<float>(be, rows * cols);
  for (int64_t n = 0; n < batch; ++n) {
    be.im2col(x + n * in_c_ * h_ * w_, in_c_, h_, w_, k_, pad_, stride_, columns_.data());
    float* out = y + n * out_c_ * cols;
    be.gemm(false, false, out_c_, cols, rows, 1.0f, wt_, rows, columns_.data(), cols, 0.0f, out,
            cols);
    be.add_channel_bias(out, b_, out_c_, cols);
  }
}

void Conv2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                      float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t rows = in_c_ * k_ * k_, cols = oh_ * ow_;
  be.fill(db_, out_c_, 0.0f);
  for (int64_t n = 0; n < batch; ++n) {
    const float* dout = dy + n * out_c_ * cols;
    be.im2col(x + n * in_c_ * h_ * w_, in_c_, h_, w_, k_, pad_, stride_, columns_.data());
    // dW (+)= dout [out_c, cols] x columns^T [cols, rows]
    be.gemm(false, true, out_c_, rows, cols, 1.0f, dout, cols, columns_.data(), cols,
            n == 0 ? 0.0f : 1.0f, dwt_, rows);
    be.accumulate_channel_sums(dout, db_, out_c_, cols);
    if (dx) {
      // dcolumns = W^T [rows, out_c] x dout [out_c, cols], then scattered back to the image.
      be.gemm(true, false, rows, cols, out_c_, 1.0f, wt_, rows, dout, cols, 0.0f, columns_.data(),
              cols);
      be.col2im(columns_.data(), in_c_, h_, w_, k_, pad_, stride_, dx + n * in_c_ * h_ * w_);
    }
  }
}

MaxPool2d::MaxPool2d(int64_t size) : size_(size) {
  if (size_ <= 0 || size_ > 64)
    throw ConfigError(fmt::format("MaxPool2d: window {} out of range [1, 64]", size_));
}

std::string MaxPool2d::describe() const {
  return fmt::format("MaxPool2d({})", size_);
}

Shape MaxPool2d::build(const Shape& input) {
  if (input.size() != 3 || input[1] < size_ || input[2] < size_)
    throw ConfigError(fmt::format("{}: input {} is not [C, H, W] with H, W >= {}", describe(),
                                  shape_text(input), size_));
  c_ = input[0];
  h_ = input[1];
  w_ = input[2];
  return {c_, h_ / size_, w_ / size_};
}

void MaxPool2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t out = batch * c_ * (h_ / size_) * (w_ / size_);
  if (argmax_.size() < out) argmax_ = DeviceBuffer<int32_t>(*ctx.backend, out);
  ctx.backend->maxpool_forward(x, y, argmax_.data(), batch * c_, h_, w_, size_);
}

void MaxPool2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  if (dx) ctx.backend->maxpool_backward(dy, argmax_.data(), dx, batch * c_, h_, w_, size_);
}

}  // namespace loom::nn
