#include "loom/nn/layers/conv2d.h"

#include <cmath>
#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

Conv2d::Conv2d(const Conv2dOptions& options) : o_(options) {
  const auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(o_.in_channels, 1, 65536) || !in(o_.out_channels, 1, 65536) || !in(o_.kernel_h, 1, 64) ||
      !in(o_.kernel_w, 1, 64) || !in(o_.stride_h, 1, 64) || !in(o_.stride_w, 1, 64) ||
      !in(o_.pad_h, 0, 1024) || !in(o_.pad_w, 0, 1024) || !in(o_.dilation_h, 1, 64) ||
      !in(o_.dilation_w, 1, 64) || !in(o_.groups, 1, 65536))
    throw ConfigError(fmt::format(
        "{}: sizes out of range (channels 1..65536, kernel, stride and dilation 1..64, padding "
        "0..1024, groups >= 1)",
        describe()));
  if (o_.in_channels % o_.groups != 0 || o_.out_channels % o_.groups != 0)
    throw ConfigError(
        fmt::format("{}: {} input and {} output channels are not divisible by {} groups",
                    describe(), o_.in_channels, o_.out_channels, o_.groups));
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
               int64_t pad)
    : Conv2d(Conv2dOptions{.in_channels = in_channels,
                           .out_channels = out_channels,
                           .kernel_h = kernel,
                           .kernel_w = kernel,
                           .stride_h = stride,
                           .stride_w = stride,
                           .pad_h = pad,
                           .pad_w = pad,
                           .dilation_h = 1,
                           .dilation_w = 1,
                           .groups = 1,
                           .bias = true}) {}

std::string Conv2d::describe() const {
  // The square form as it always read; other options only when they differ from it.
  const auto pair = [](int64_t a, int64_t b) {
    return a == b ? fmt::format("{}", a) : fmt::format("{}x{}", a, b);
  };
  std::string s = fmt::format("Conv2d({} -> {}, k={}, stride={}, pad={}", o_.in_channels,
                              o_.out_channels, pair(o_.kernel_h, o_.kernel_w),
                              pair(o_.stride_h, o_.stride_w), pair(o_.pad_h, o_.pad_w));
  if (o_.dilation_h != 1 || o_.dilation_w != 1)
    s += fmt::format(", dilation={}", pair(o_.dilation_h, o_.dilation_w));
  if (o_.groups != 1) s += fmt::format(", groups={}", o_.groups);
  if (!o_.bias) s += ", bias=false";
  return s + ")";
}

Shape Conv2d::build(const Shape& input) {
  if (input.size() != 3 || input[0] != o_.in_channels)
    throw ConfigError(fmt::format("{}: input {} is not [{}, H, W]", describe(), shape_text(input),
                                  o_.in_channels));
  const int64_t h = input[1], w = input[2];
  // The rows and columns one output element sees, dilation included.
  const int64_t extent_h = o_.dilation_h * (o_.kernel_h - 1) + 1;
  const int64_t extent_w = o_.dilation_w * (o_.kernel_w - 1) + 1;
  if (h + 2 * o_.pad_h < extent_h || w + 2 * o_.pad_w < extent_w)
    throw ConfigError(fmt::format(
        "{}: kernel extent {}x{} is larger than the input {} padded to {}x{}", describe(), extent_h,
        extent_w, shape_text(input), h + 2 * o_.pad_h, w + 2 * o_.pad_w));
  geometry_ = ConvGeometry{.batch = 0,
                           .in_c = o_.in_channels,
                           .in_h = h,
                           .in_w = w,
                           .out_c = o_.out_channels,
                           .out_h = (h + 2 * o_.pad_h - extent_h) / o_.stride_h + 1,
                           .out_w = (w + 2 * o_.pad_w - extent_w) / o_.stride_w + 1,
                           .kernel_h = o_.kernel_h,
                           .kernel_w = o_.kernel_w,
                           .stride_h = o_.stride_h,
                           .stride_w = o_.stride_w,
                           .pad_h = o_.pad_h,
                           .pad_w = o_.pad_w,
                           .dilation_h = o_.dilation_h,
                           .dilation_w = o_.dilation_w,
                           .groups = o_.groups};
  return {o_.out_channels, geometry_.out_h, geometry_.out_w};
}

std::vector<std::array<int64_t, 2>> Conv2d::param_matrices() const {
  std::vector<std::array<int64_t, 2>> m{{o_.out_channels, fan_in()}};
  if (o_.bias) m.push_back({1, o_.out_channels});
  return m;
}

std::vector<TensorSpec> Conv2d::param_tensors() const {
  std::vector<TensorSpec> t{
      {"weight", {o_.out_channels, o_.in_channels / o_.groups, o_.kernel_h, o_.kernel_w}}};
  if (o_.bias) t.push_back({"bias", {o_.out_channels}});
  return t;
}

ConvGeometry Conv2d::geometry(int64_t batch) const {
  ConvGeometry g = geometry_;
  g.batch = batch;
  return g;
}

void Conv2d::bind(float* params, float* grads) {
  wt_ = params;
  dwt_ = grads;
  b_ = o_.bias ? params + weight_count() : nullptr;
  db_ = o_.bias ? grads + weight_count() : nullptr;
}

void Conv2d::init_params(Rng& rng, Backend& backend) {
  // PyTorch's default: weights and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), weights
  // first, from one stream.
  const float bound = 1.0f / std::sqrt(float(fan_in()));
  std::vector<float> host(static_cast<size_t>(num_params()));
  for (float& v : host) v = (2.0f * rng.uniform() - 1.0f) * bound;
  backend.copy_to_device(wt_, host.data(), host.size() * sizeof(float));
}

void Conv2d::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  if (ctx.training)
    ctx.backend->conv2d_forward_training(geometry(batch), x, wt_, b_, y);
  else
    ctx.backend->conv2d_forward(geometry(batch), x, wt_, b_, y);
}

void Conv2d::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                      float* dx, int64_t batch) {
  ctx.backend->conv2d_backward(geometry(batch), x, wt_, dy, dx, dwt_, db_);
}

}  // namespace loom::nn
