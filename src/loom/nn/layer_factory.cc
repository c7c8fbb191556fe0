#include "loom/nn/layer_factory.h"

#include "loom/core/error.h"
#include "loom/nn/activation.h"
#include "loom/nn/conv2d.h"
#include "loom/nn/linear.h"
#include "loom/nn/merge.h"

namespace loom::nn {

namespace {

constexpr int64_t kMaxWidth = int64_t(1) << 24;

std::unique_ptr<Layer> make_linear(LayerArgs& a, const std::vector<Shape>& in) {
  if (in[0].size() != 1)
    a.fail(fmt::format("input {} is not [features]; put a flatten layer before it",
                       shape_text(in[0])));
  const int64_t out = a.require_int("out", 1, kMaxWidth);
  const bool bias = a.get_bool("bias", true);
  return std::make_unique<Linear>(in[0][0], out, bias);
}

std::unique_ptr<Layer> make_conv2d(LayerArgs& a, const std::vector<Shape>& in) {
  if (in[0].size() != 3) a.fail(fmt::format("input {} is not [C, H, W]", shape_text(in[0])));
  const int64_t out = a.require_int("out", 1, 65536);
  const int64_t kernel = a.require_int("kernel", 1, 64);
  const int64_t stride = a.get_int("stride", 1, 1, 64);
  const int64_t pad = a.get_int("padding", 0, 0, 64);
  return std::make_unique<Conv2d>(in[0][0], out, kernel, stride, pad);
}

std::unique_ptr<Layer> make_maxpool2d(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<MaxPool2d>(a.require_int("kernel", 1, 64));
}

std::unique_ptr<Layer> make_dropout(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<Dropout>(float(a.get_double("p", 0.5, 0.0, 0.99)));
}

}  // namespace

const std::vector<LayerType>& layer_types() {
  static const std::vector<LayerType> types = {
      {"linear", "out, bias = true", "y = x W^T + b over [features]", make_linear},
      {"conv2d", "out, kernel, stride = 1, padding = 0", "2-D convolution of [C, H, W]",
       make_conv2d},
      {"maxpool2d", "kernel", "max over kernel x kernel windows, stride = kernel",
       make_maxpool2d},
      {"relu", "", "max(x, 0)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<ReLU>(); }},
      {"dropout", "p = 0.5", "inverted dropout in training, identity in eval", make_dropout},
      {"flatten", "", "[C, H, W] -> [C*H*W]",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Flatten>(); }},
      {"add", "", "elementwise sum of two or more inputs of one shape (residual)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Add>(); }},
      {"concat", "axis = 0", "join inputs along a per-sample axis (0: channels)",
       [](LayerArgs& a, const std::vector<Shape>& in) {
         return std::make_unique<Concat>(a.get_int("axis", 0, 0, int64_t(in[0].size()) - 1));
       }},
  };
  return types;
}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& name,
                                  const std::vector<Shape>& inputs) {
  LayerArgs args(spec, name);
  const auto& types = layer_types();
  const LayerType* type = nullptr;
  for (const auto& t : types)
    if (t.type == spec.type) type = &t;
  if (!type) {
    std::string names;
    for (const auto& t : types) names += (names.empty() ? "" : ", ") + t.type;
    args.fail(fmt::format("unknown layer type '{}'; loom has {}", spec.type, names));
  }
  std::unique_ptr<Layer> layer = type->make(args, inputs);
  args.check_all_used(type->takes);
  const int n = int(inputs.size());
  if (n < layer->min_inputs() || n > layer->max_inputs())
    args.fail(layer->min_inputs() == layer->max_inputs()
                  ? fmt::format("takes {} input(s), the graph gives it {}", layer->min_inputs(), n)
                  : fmt::format("takes {} to {} inputs, the graph gives it {}",
                                layer->min_inputs(), layer->max_inputs(), n));
  return layer;
}

}  // namespace loom::nn
