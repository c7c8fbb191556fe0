#include "loom/nn/layers/pool2d.h"

#include "loom/core/error.h"

namespace loom::nn {
namespace {

// PyTorch's pooling_output_shape: floor or ceil, and in ceil mode the last window must start
// inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

Pool2dBase::Pool2dBase(const char* kind, const Pool2dOptions& options) : o_(options) {
  const auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(o_.kernel_h, 1, 64) || !in(o_.kernel_w, 1, 64) || !in(o_.stride_h, 1, 64) ||
      !in(o_.stride_w, 1, 64))
    throw ConfigError(
        fmt::format("{}({}): window and stride must be in [1, 64]", kind, options_text()));
  if (o_.pad_h < 0 || o_.pad_w < 0 || 2 * o_.pad_h > o_.kernel_h || 2 * o_.pad_w > o_.kernel_w)
    throw ConfigError(
        fmt::format("{}({}): padding must be in [0, half the window]", kind, options_text()));
}

std::string Pool2dBase::options_text() const {
  std::string s =
      fmt::format("kernel={}x{}, stride={}x{}", o_.kernel_h, o_.kernel_w, o_.stride_h, o_.stride_w);
  if (o_.pad_h || o_.pad_w) s += fmt::format(", pad={}x{}", o_.pad_h, o_.pad_w);
  if (o_.ceil_mode) s += ", ceil_mode";
  return s;
}

Shape Pool2dBase::build(const Shape& input) {
  if (input.size() != 3 || input[1] + 2 * o_.pad_h < o_.kernel_h ||
      input[2] + 2 * o_.pad_w < o_.kernel_w)
    throw ConfigError(
        fmt::format("{}: input {} is not [C, H, W] with H, W (padded) at least the "
                    "window {}x{}",
                    describe(), shape_text(input), o_.kernel_h, o_.kernel_w));
  geometry_ =
      PoolGeometry{.planes = input[0],
                   .in_h = input[1],
                   .in_w = input[2],
                   .out_h = pooled_size(input[1], o_.kernel_h, o_.stride_h, o_.pad_h, o_.ceil_mode),
                   .out_w = pooled_size(input[2], o_.kernel_w, o_.stride_w, o_.pad_w, o_.ceil_mode),
                   .kernel_h = o_.kernel_h,
                   .kernel_w = o_.kernel_w,
                   .stride_h = o_.stride_h,
                   .stride_w = o_.stride_w,
                   .pad_h = o_.pad_h,
                   .pad_w = o_.pad_w};
  return {input[0], geometry_.out_h, geometry_.out_w};
}

PoolGeometry Pool2dBase::geometry(int64_t batch) const {
  PoolGeometry g = geometry_;
  g.planes *= batch;
  return g;
}

MaxPool2d::MaxPool2d(const Pool2dOptions& options) : Pool2dBase("MaxPool2d", options) {}

MaxPool2d::MaxPool2d(int64_t size)
    : Pool2dBase("MaxPool2d", Pool2dOptions{.kernel_h = size,
                                            .kernel_w = size,
                                            .stride_h = size,
                                            .stride_w = size,
                                            .pad_h = 0,
                                            .pad_w = 0,
                                            .ceil_mode = false,
                                            .count_include_pad = true}) {}

std::string MaxPool2d::describe() const {
  // The tiled window as it always read.
  if (o_.kernel_h == o_.kernel_w && o_.stride_h == o_.kernel_h && o_.stride_w == o_.kernel_w &&
      !o_.pad_h && !o_.pad_w && !o_.ceil_mode)
    return fmt::format("MaxPool2d({})", o_.kernel_h);
  return fmt::format("MaxPool2d({})", options_text());
}

void MaxPool2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const PoolGeometry g = geometry(batch);
  const int64_t out = g.planes * g.out_h * g.out_w;
  if (argmax_.size() < out) argmax_ = DeviceBuffer<int32_t>(*ctx.backend, out);
  ctx.backend->maxpool2d_forward(g, x, y, argmax_.data());
}

void MaxPool2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  if (dx) ctx.backend->maxpool2d_backward(geometry(batch), dy, argmax_.data(), dx);
}

AvgPool2d::AvgPool2d(const Pool2dOptions& options) : Pool2dBase("AvgPool2d", options) {}

std::string AvgPool2d::describe() const {
  return fmt::format("AvgPool2d({}{})", options_text(),
                     o_.count_include_pad ? "" : ", count_include_pad=false");
}

void AvgPool2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->avgpool2d_forward(geometry(batch), o_.count_include_pad, x, y);
}

void AvgPool2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  if (dx) ctx.backend->avgpool2d_backward(geometry(batch), o_.count_include_pad, dy, dx);
}

Shape GlobalAvgPool2d::build(const Shape& input) {
  if (input.size() != 3 || input[1] < 1 || input[2] < 1)
    throw ConfigError(fmt::format("GlobalAvgPool2d: input {} is not [C, H, W]", shape_text(input)));
  c_ = input[0];
  h_ = input[1];
  w_ = input[2];
  return keep_dims_ ? Shape{c_, 1, 1} : Shape{c_};
}

std::string GlobalAvgPool2d::describe() const {
  return keep_dims_ ? "GlobalAvgPool2d(keep_dims=true)" : "GlobalAvgPool2d";
}

// One window over the whole image: [batch * C, H, W] -> [batch * C, 1, 1], which is [batch, C].
PoolGeometry GlobalAvgPool2d::geometry(int64_t batch) const {
  return PoolGeometry{.planes = batch * c_,
                      .in_h = h_,
                      .in_w = w_,
                      .out_h = 1,
                      .out_w = 1,
                      .kernel_h = h_,
                      .kernel_w = w_,
                      .stride_h = h_,
                      .stride_w = w_,
                      .pad_h = 0,
                      .pad_w = 0};
}

void GlobalAvgPool2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  ctx.backend->avgpool2d_forward(geometry(batch), true, x, y);
}

void GlobalAvgPool2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                               float* dx, int64_t batch) {
  if (dx) ctx.backend->avgpool2d_backward(geometry(batch), true, dy, dx);
}

}  // namespace loom::nn
