#include "loom/nn/layers/layer_factory.h"

#include "loom/core/error.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/attention.h"
#include "loom/nn/layers/attention_parts.h"
#include "loom/nn/layers/batchnorm.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/embedding.h"
#include "loom/nn/layers/fixed_bias.h"
#include "loom/nn/layers/layernorm.h"
#include "loom/nn/layers/linear.h"
#include "loom/nn/layers/merge.h"
#include "loom/nn/layers/pad.h"
#include "loom/nn/layers/pointwise.h"
#include "loom/nn/layers/pool2d.h"
#include "loom/nn/layers/relative_position_bias.h"
#include "loom/nn/layers/shape_ops.h"

namespace loom::nn {

namespace {

constexpr int64_t kMaxWidth = int64_t(1) << 24;

std::unique_ptr<Layer> make_linear(LayerArgs& a, const std::vector<Shape>& in) {
  if (in[0].size() != 1 && in[0].size() != 2)
    a.fail(
        fmt::format("input {} is not [features] or [positions, features]; put a flatten "
                    "layer before it",
                    shape_text(in[0])));
  const int64_t out = a.require_int("out", 1, kMaxWidth);
  const bool bias = a.get_bool("bias", true);
  return std::make_unique<Linear>(in[0].back(), out, bias);
}

std::unique_ptr<Layer> make_conv2d(LayerArgs& a, const std::vector<Shape>& in) {
  if (in[0].size() != 3) a.fail(fmt::format("input {} is not [C, H, W]", shape_text(in[0])));
  Conv2dOptions o;
  o.in_channels = in[0][0];
  o.out_channels = a.require_int("out", 1, 65536);
  if (!a.has("kernel")) a.fail("kernel", "is required");
  const auto k = a.get_pair("kernel", {1, 1}, 1, 64);
  const auto s = a.get_pair("stride", {1, 1}, 1, 64);
  const auto p = a.get_pair("padding", {0, 0}, 0, 64);
  const auto d = a.get_pair("dilation", {1, 1}, 1, 64);
  o.kernel_h = k[0], o.kernel_w = k[1], o.stride_h = s[0], o.stride_w = s[1];
  o.pad_h = p[0], o.pad_w = p[1], o.dilation_h = d[0], o.dilation_w = d[1];
  o.groups = a.get_int("groups", 1, 1, 65536);
  o.bias = a.get_bool("bias", true);
  return std::make_unique<Conv2d>(o);
}

// kernel required; stride defaults to the kernel (PyTorch's rule).
Pool2dOptions pool_options(LayerArgs& a, bool average) {
  Pool2dOptions o;
  if (!a.has("kernel")) a.fail("kernel", "is required");
  const auto k = a.get_pair("kernel", {2, 2}, 1, 64);
  const auto s = a.get_pair("stride", k, 1, 64);
  const auto p = a.get_pair("padding", {0, 0}, 0, 32);
  o.kernel_h = k[0], o.kernel_w = k[1], o.stride_h = s[0], o.stride_w = s[1];
  o.pad_h = p[0], o.pad_w = p[1];
  o.ceil_mode = a.get_bool("ceil_mode", false);
  if (average) o.count_include_pad = a.get_bool("count_include_pad", true);
  return o;
}

std::unique_ptr<Layer> make_maxpool2d(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<MaxPool2d>(pool_options(a, false));
}

std::unique_ptr<Layer> make_avgpool2d(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<AvgPool2d>(pool_options(a, true));
}

// rank: the per-sample rank the type names ("batchnorm2d": [C, H, W]; "batchnorm1d": [C] or
// [C, L]).
std::unique_ptr<Layer> make_batchnorm(LayerArgs& a, const std::vector<Shape>& in, bool image) {
  const size_t r = in[0].size();
  if (image ? r != 3 : (r != 1 && r != 2))
    a.fail(fmt::format("input {} is not {}", shape_text(in[0]),
                       image ? "[C, H, W]" : "[C] or [C, L]"));
  const float eps = float(a.get_double("eps", 1e-5, 1e-12, 1.0));
  const float momentum = float(a.get_double("momentum", 0.1, 0.0, 1.0));
  const bool sync = a.get_bool("sync", false);
  return std::make_unique<BatchNorm>(in[0][0], eps, momentum, sync);
}

std::unique_ptr<Layer> make_dropout(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<Dropout>(float(a.get_double("p", 0.5, 0.0, 0.99)));
}

std::unique_ptr<Layer> make_embedding(LayerArgs& a, const std::vector<Shape>& in) {
  if (in[0].size() != 1)
    a.fail(fmt::format("input {} is not [time] (one token id per position)", shape_text(in[0])));
  const int64_t vocab = a.require_int("vocab", 1, kMaxWidth);
  const int64_t dim = a.require_int("dim", 1, 65536);
  return std::make_unique<Embedding>(vocab, dim);
}

std::unique_ptr<Layer> make_class_token(LayerArgs& a, const std::vector<Shape>& in) {
  const int64_t count = a.get_int("count", 1, 1, 1 << 20);
  if (in[0].size() != 2) a.fail(fmt::format("input {} is not [time, dim]", shape_text(in[0])));
  return std::make_unique<ClassToken>(count, in[0][1]);
}

std::unique_ptr<Layer> make_relative_position_bias(LayerArgs& a, const std::vector<Shape>&) {
  return std::make_unique<RelativePositionBias>(a.require_int("window", 1, 256),
                                                a.require_int("heads", 1, 4096));
}

std::unique_ptr<Layer> make_position_embedding(LayerArgs& a, const std::vector<Shape>& in) {
  const int64_t max_len = a.require_int("max_len", 1, 1 << 20);
  const int64_t dim = a.require_int("dim", 1, 65536);
  if (in[0].size() != 2 || in[0][1] != dim)
    a.fail(fmt::format("input {} is not [time, {}]", shape_text(in[0]), dim));
  if (in[0][0] > max_len)
    a.fail(fmt::format("input {} has {} positions, more than max_len = {}", shape_text(in[0]),
                       in[0][0], max_len));
  return std::make_unique<PositionEmbedding>(max_len, dim);
}

std::unique_ptr<Layer> make_attention(LayerArgs& a, const std::vector<Shape>& in) {
  const int64_t dim = a.require_int("dim", 1, 65536);
  const int64_t heads = a.require_int("heads", 1, 4096);
  if (dim % heads != 0) a.fail("heads", fmt::format("= {} does not divide dim = {}", heads, dim));
  const double dropout = a.get_double("dropout", 0.0, 0.0, 1.0);
  if (dropout != 0.0)
    a.fail("dropout", fmt::format("= {}: attention dropout is not implemented; only 0 is "
                                  "accepted (put a dropout layer after the attention instead)",
                                  dropout));
  const bool bias = a.get_bool("bias", true);
  if (in[0].size() != 2 || in[0][1] != dim)
    a.fail(fmt::format("input {} is not [time, {}]", shape_text(in[0]), dim));
  return std::make_unique<CausalSelfAttention>(dim, heads, bias);
}

}  // namespace

const std::vector<LayerType>& layer_types() {
  static const std::vector<LayerType> types = {
      {"linear", "out, bias = true",
       "y = x W^T + b over [features], or over the last axis of [positions, features]",
       make_linear},
      {"conv2d", "out, kernel, stride = 1, padding = 0, dilation = 1, groups = 1, bias = true",
       "2-D convolution of [C, H, W] (kernel, stride, padding, dilation: n or [h, w])",
       make_conv2d},
      {"maxpool2d", "kernel, stride = kernel, padding = 0, ceil_mode = false",
       "max over windows of [C, H, W]", make_maxpool2d},
      {"avgpool2d",
       "kernel, stride = kernel, padding = 0, ceil_mode = false, "
       "count_include_pad = true",
       "mean over windows of [C, H, W]", make_avgpool2d},
      {"globalavgpool2d", "keep_dims = false",
       "[C, H, W] -> [C] (keep_dims: [C, 1, 1]), the mean of each channel",
       [](LayerArgs& a, const std::vector<Shape>&) {
         return std::make_unique<GlobalAvgPool2d>(a.get_bool("keep_dims", false));
       }},
      {"batchnorm2d", "eps = 1e-5, momentum = 0.1, sync = false",
       "batch normalisation of [C, H, W] per channel (sync: over all workers' batches)",
       [](LayerArgs& a, const std::vector<Shape>& in) { return make_batchnorm(a, in, true); }},
      {"batchnorm1d", "eps = 1e-5, momentum = 0.1, sync = false",
       "batch normalisation of [C] or [C, L] per channel",
       [](LayerArgs& a, const std::vector<Shape>& in) { return make_batchnorm(a, in, false); }},
      {"leakyrelu", "slope = 0.01", "x if x > 0, else slope x",
       [](LayerArgs& a, const std::vector<Shape>&) {
         return std::make_unique<LeakyReLU>(float(a.get_double("slope", 0.01, 0.0, 1.0)));
       }},
      {"gelu", "", "x Phi(x), the exact (erf) form",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<GELU>(); }},
      {"silu", "", "x sigmoid(x)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<SiLU>(); }},
      {"tanh", "", "tanh(x)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Tanh>(); }},
      {"sigmoid", "", "1 / (1 + exp(-x))",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Sigmoid>(); }},
      {"relu6", "", "min(max(x, 0), 6)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<ReLU6>(); }},
      {"hardsigmoid", "", "min(max(x / 6 + 1/2, 0), 1)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<HardSigmoid>(); }},
      {"hardswish", "", "x hardsigmoid(x)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<HardSwish>(); }},
      {"relu", "", "max(x, 0)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<ReLU>(); }},
      {"dropout", "p = 0.5", "inverted dropout in training, identity in eval", make_dropout},
      {"flatten", "", "[C, H, W] -> [C*H*W]",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Flatten>(); }},
      {"add", "", "elementwise sum of two or more inputs of one shape (residual)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Add>(); }},
      {"mul", "",
       "elementwise product of two inputs of one shape, or one broadcast over the other's "
       "trailing axes ([C, 1, 1] with [C, H, W])",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<Mul>(); }},
      {"reshape", "shape", "the same values as another per-sample shape ([C, H, W] -> shape)",
       [](LayerArgs& a, const std::vector<Shape>&) {
         return std::make_unique<Reshape>(a.require_ints("shape", 1, kMaxWidth));
       }},
      {"transpose", "perm",
       "the per-sample axes in the order perm (axis i of the output is "
       "input axis perm[i]; the batch stays first)",
       [](LayerArgs& a, const std::vector<Shape>& in) {
         return std::make_unique<Transpose>(a.require_ints("perm", 0, int64_t(in[0].size()) - 1));
       }},
      {"slice", "axis, start, end", "elements [start, end) of a per-sample axis",
       [](LayerArgs& a, const std::vector<Shape>& in) {
         const int64_t axis = a.require_int("axis", 0, int64_t(in[0].size()) - 1);
         const int64_t len = in[0][size_t(axis)];
         const int64_t start = a.require_int("start", 0, len - 1);
         return std::make_unique<Slice>(axis, start, a.require_int("end", start + 1, len));
       }},
      {"pad", "before, after",
       "zeros before and after each per-sample axis (one count per axis in each list)",
       [](LayerArgs& a, const std::vector<Shape>& in) {
         const int64_t rank = int64_t(in[0].size());
         auto counts = [&](const char* key) {
           std::vector<int64_t> v = a.require_ints(key, 0, 1 << 20);
           if (int64_t(v.size()) != rank)
             a.fail(key, fmt::format("has {} entries; the input {} has {} axes", v.size(),
                                     shape_text(in[0]), rank));
           return v;
         };
         std::vector<int64_t> before = counts("before");
         return std::make_unique<Pad>(std::move(before), counts("after"));
       }},
      {"concat", "axis = 0", "join inputs along a per-sample axis (0: channels)",
       [](LayerArgs& a, const std::vector<Shape>& in) {
         return std::make_unique<Concat>(a.get_int("axis", 0, 0, int64_t(in[0].size()) - 1));
       }},
      {"embedding", "vocab, dim",
       "[time] token ids (integers in [0, vocab), carried as floats) -> [time, dim] table rows",
       make_embedding},
      {"position_embedding", "max_len, dim",
       "adds a learned [max_len, dim] table's first time rows to [time, dim]",
       make_position_embedding},
      {"class_token", "count = 1",
       "puts count learned rows before [time, dim]: [count + time, dim] (ViT's class token)",
       make_class_token},
      {"relative_position_bias", "window, heads",
       "adds a learned bias per head and offset to window attention's scores [..., heads, w*w, "
       "w*w] (Swin's, MaxViT's)",
       make_relative_position_bias},
      {"fixed_bias", "",
       "adds a fixed tensor of the input's shape, not learned (an imported constant such as Swin's "
       "shifted-window mask; zeros unless imported)",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<FixedBias>(); }},
      {"layernorm", "eps = 1e-5", "layer normalisation over the last axis, learned gain and bias",
       [](LayerArgs& a, const std::vector<Shape>&) {
         return std::make_unique<LayerNorm>(float(a.get_double("eps", 1e-5, 1e-12, 1.0)));
       }},
      {"matmul", "",
       "the product of two inputs [..., M, K] and [..., K, N], batched over their leading axes",
       [](LayerArgs&, const std::vector<Shape>&) { return std::make_unique<MatMul>(); }},
      {"softmax", "causal = false",
       "softmax over the last axis (causal: of square [t, t] blocks, row i over entries 0..i)",
       [](LayerArgs& a, const std::vector<Shape>&) {
         return std::make_unique<Softmax>(a.get_bool("causal", false));
       }},
      {"scale", "factor", "x times a constant factor",
       [](LayerArgs& a, const std::vector<Shape>&) {
         if (!a.has("factor")) a.fail("factor", "is required");
         return std::make_unique<Scale>(float(a.get_double("factor", 1.0, -1e30, 1e30)));
       }},
      {"attention", "dim, heads, dropout = 0, bias = true",
       "causal multi-head self-attention over [time, dim] (position i sees 0..i)", make_attention},
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
                  : fmt::format("takes {} to {} inputs, the graph gives it {}", layer->min_inputs(),
                                layer->max_inputs(), n));
  return layer;
}

}  // namespace loom::nn
