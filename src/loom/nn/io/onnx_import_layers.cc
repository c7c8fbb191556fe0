// The ONNX ops that become loom layers: convolution and pooling windows, Gemm and MatMul, the
// elementwise Add and Mul (with the fused SiLU, Hardswish and GELU patterns), BatchNorm, Dropout,
// Concat, Sum and Pad.
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"
#include "loom/nn/layers/merge.h"

namespace loom::nn::onnx_import {

Importer::Window Importer::window(const onnx::NodeProto& n, int64_t kh, int64_t kw) const {
  const std::string auto_pad = attr_string(n, "auto_pad");
  if (!auto_pad.empty() && auto_pad != "NOTSET" && auto_pad != "VALID")
    fail_node(n, fmt::format("auto_pad {} is not read; export with explicit pads", auto_pad));
  auto k = attr_ints(n, "kernel_shape", {kh, kw});
  auto s = attr_ints(n, "strides", {1, 1});
  auto p = attr_ints(n, "pads", {0, 0, 0, 0});
  auto d = attr_ints(n, "dilations", {1, 1});
  if (k.size() != 2 || s.size() != 2 || p.size() != 4 || d.size() != 2)
    fail_node(n, "kernel_shape, strides, pads or dilations is not of a 2-D window");
  if (p[0] != p[2] || p[1] != p[3])
    fail_node(n, fmt::format("pads {} differ at the two ends of an axis; loom pads both ends "
                             "alike",
                             dims_text(p)));
  for (int64_t x : {k[0], k[1], s[0], s[1], d[0], d[1]})
    if (x < 1 || x > 1024) fail_node(n, "a kernel size, stride or dilation is out of range");
  for (int64_t x : p)
    if (x < 0 || x > 1024) fail_node(n, "a pad is out of range");
  return {k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]};
}

void Importer::conv(const onnx::NodeProto& n) {
  only_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  int64_t pre_h = 0, pre_w = 0;
  const Value& x = padded_activation(n, pre_h, pre_w);
  const Value& w = constant(n, 1);
  if (x.shape.size() != 3)
    fail_node(n, fmt::format("input is {}; loom convolves [batch, C, H, W] images only",
                             batch_shape_text(x.shape)));
  if (w.dims.size() != 4 || w.is_int)
    fail_node(n, fmt::format("weights '{}' are {}, not [out, in / groups, kh, kw]", n.input(1),
                             dims_text(w.dims)));
  const int64_t groups = attr_int(n, "group", 1);
  const int64_t out = w.dims[0];
  if (groups < 1 || groups > 65536 || out == 0 || out % groups != 0 ||
      w.dims[1] * groups != x.shape[0])
    fail_node(n, fmt::format("weights {} with {} group(s) do not fit an input of {} channels",
                             dims_text(w.dims), groups, x.shape[0]));
  Window win = window(n, w.dims[2], w.dims[3]);
  win.ph += pre_h;
  win.pw += pre_w;
  if (win.kh != w.dims[2] || win.kw != w.dims[3])
    fail_node(n, fmt::format("kernel_shape [{}, {}] differs from the weights' {}", win.kh, win.kw,
                             dims_text(w.dims)));
  std::vector<float> bias;
  if (has_input(n, 2)) {
    const Value& b = constant(n, 2);
    if (b.dims != std::vector<int64_t>{out} || b.is_int)
      fail_node(n, fmt::format("bias '{}' is {}, not [{}]", n.input(2), dims_text(b.dims), out));
    bias = b.floats;
  }
  const int64_t oh = (x.shape[1] + 2 * win.ph - win.dh * (win.kh - 1) - 1) / win.sh + 1;
  const int64_t ow = (x.shape[2] + 2 * win.pw - win.dw * (win.kw - 1) - 1) / win.sw + 1;
  if (oh < 1 || ow < 1)
    fail_node(n, fmt::format("the window does not fit the input {}", batch_shape_text(x.shape)));
  std::vector<float> params = w.floats;
  params.insert(params.end(), bias.begin(), bias.end());
  LayerSpec& l = emit(n, "conv2d", {&x}, {out, oh, ow});
  // Parameters at PyTorch's defaults are left out, so the graph reads as one written by hand.
  l.params["out"] = cv(out);
  l.params["kernel"] = cv_pair(win.kh, win.kw);
  if (win.sh != 1 || win.sw != 1) l.params["stride"] = cv_pair(win.sh, win.sw);
  if (win.ph != 0 || win.pw != 0) l.params["padding"] = cv_pair(win.ph, win.pw);
  if (win.dh != 1 || win.dw != 1) l.params["dilation"] = cv_pair(win.dh, win.dw);
  if (groups != 1) l.params["groups"] = cv(groups);
  if (bias.empty()) l.params["bias"] = cv(false);
  l.init_params = std::move(params);
}

void Importer::pool(const onnx::NodeProto& n, bool max) {
  if (max)
    only_attrs(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
                   "strides"});
  else
    only_attrs(n,
               {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  if (max && n.output_size() > 1) unused_outputs_from(n, 1);
  int64_t pre_h = 0, pre_w = 0;
  const Value& x = max ? activation(n, 0) : padded_activation(n, pre_h, pre_w);
  if (x.shape.size() != 3)
    fail_node(n, fmt::format("input is {}; loom pools [batch, C, H, W] images only",
                             batch_shape_text(x.shape)));
  if (!Attrs{n}.find("kernel_shape")) fail_node_input(n, "kernel_shape is missing");
  Window win = window(n, 1, 1);
  if ((pre_h || pre_w) && (win.ph || win.pw || attr_int(n, "ceil_mode", 0)))
    fail_node(n, "a Pad before an AveragePool that pads or uses ceil_mode itself is not read");
  win.ph += pre_h;
  win.pw += pre_w;
  if (win.dh != 1 || win.dw != 1) fail_node(n, "dilated pooling is not read");
  if (win.ph * 2 > win.kh || win.pw * 2 > win.kw)
    fail_node(n, "a pad is larger than half the window");
  const bool ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  // PyTorch's rule: with ceil_mode, the last window must start inside the input or the left
  // padding.
  auto out_size = [&](int64_t in, int64_t k, int64_t s, int64_t p) {
    const int64_t span = in + 2 * p - k;
    if (span < 0) return int64_t(0);
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) --o;
    return o;
  };
  const int64_t oh = out_size(x.shape[1], win.kh, win.sh, win.ph);
  const int64_t ow = out_size(x.shape[2], win.kw, win.sw, win.pw);
  if (oh < 1 || ow < 1)
    fail_node(n, fmt::format("the window does not fit the input {}", batch_shape_text(x.shape)));
  LayerSpec& l = emit(n, max ? "maxpool2d" : "avgpool2d", {&x}, {x.shape[0], oh, ow});
  l.params["kernel"] = cv_pair(win.kh, win.kw);
  if (win.sh != win.kh || win.sw != win.kw) l.params["stride"] = cv_pair(win.sh, win.sw);
  if (win.ph != 0 || win.pw != 0) l.params["padding"] = cv_pair(win.ph, win.pw);
  if (ceil_mode) l.params["ceil_mode"] = cv(true);
  // ONNX defaults count_include_pad to 0, PyTorch to true; only padding makes it matter, and
  // the zeros of a Pad before the pool always count.
  if (!max && (win.ph != 0 || win.pw != 0) && !(pre_h || pre_w) &&
      attr_int(n, "count_include_pad", 0) == 0)
    l.params["count_include_pad"] = cv(false);
}

void Importer::gemm(const onnx::NodeProto& n) {
  only_attrs(n, {"alpha", "beta", "transA", "transB"});
  const Value& x = activation(n, 0);
  const Value& b = constant(n, 1);
  if (attr_float(n, "alpha", 1) != 1 || attr_float(n, "beta", 1) != 1)
    fail_node(n, "alpha and beta other than 1 are not read");
  if (attr_int(n, "transA", 0) != 0) fail_node(n, "transA = 1 is not read");
  const bool trans_b = attr_int(n, "transB", 0) != 0;
  // [batch, features]; or, under a layout view ([positions * batch, features], as
  // nn.MultiheadAttention's output projection reads it), positions too.
  if (x.shape.empty())
    fail_node(n, fmt::format("input is {}, not [batch, features]", batch_shape_text(x.shape)));
  if (b.dims.size() != 2 || b.is_int)
    fail_node(n, fmt::format("weights '{}' are {}, not a matrix", n.input(1), dims_text(b.dims)));
  const int64_t in = trans_b ? b.dims[1] : b.dims[0];
  const int64_t out = trans_b ? b.dims[0] : b.dims[1];
  if (in != x.shape.back())
    fail_node(n, fmt::format("weights {}{} do not take {} features", dims_text(b.dims),
                             trans_b ? " (transposed)" : "", x.shape.back()));
  std::vector<float> params;
  if (trans_b) {
    params = b.floats;
  } else {
    // loom's linear holds W as [out, in], as PyTorch's Linear does.
    params.resize(b.floats.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) params[size_t(o * in + i)] = b.floats[size_t(i * out + o)];
  }
  bool bias = false;
  if (has_input(n, 2)) {
    const Value& c = constant(n, 2);
    if (c.is_int || (c.dims != std::vector<int64_t>{out} && c.dims != std::vector<int64_t>{1, out}))
      fail_node(n, fmt::format("bias '{}' is {}, not [{}]", n.input(2), dims_text(c.dims), out));
    params.insert(params.end(), c.floats.begin(), c.floats.end());
    bias = true;
  }
  emit_linear(n, x, out, bias, std::move(params));
}

LayerSpec& Importer::emit_linear(const onnx::NodeProto& n, const Value& x, int64_t out, bool bias,
                                 std::vector<float> params) {
  const int64_t in = x.shape.back();
  Shape out_shape = x.shape;
  out_shape.back() = out;
  // loom's linear takes [features] or [positions, features]: more leading axes (ConvNeXt's
  // channels-last [H, W, C]) are positions, reshaped around it.
  const bool wrapped = x.shape.size() > 2;
  auto reshape = [&](const Value& from, const Shape& to, int output) {
    emit(n, "reshape", {&from}, to, "Reshape", output).params["shape"] = cv_ints(to);
    return inner_value(to);
  };
  const Value rows = wrapped ? reshape(x, {elements(x.shape) / in, in}, kInner) : x;
  Shape linear_shape = rows.shape;
  linear_shape.back() = out;
  LayerSpec& l = emit(n, "linear", {&rows}, linear_shape, "", wrapped ? kInner : 0);
  l.params["out"] = cv(out);
  if (!bias) l.params["bias"] = cv(false);
  l.init_params = std::move(params);
  const size_t linear = graph_.layers.size() - 1;
  if (wrapped) reshape(inner_value(linear_shape), out_shape, 0);
  return graph_.layers[linear];
}

void Importer::matmul(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& x = activation(n, 0);
  if (input(n, 1).kind != Value::kConstant) return matmul_of_activations(n, x, activation(n, 1));
  const Value& b = constant(n, 1);
  if (x.shape.empty()) fail_node(n, "the input has no axis for a linear layer");
  if (b.dims.size() != 2 || b.is_int || b.dims[0] != x.shape.back())
    fail_node(n, fmt::format("weights '{}' are {}, not [{}, out]", n.input(1), dims_text(b.dims),
                             x.shape.back()));
  const int64_t in = b.dims[0], out = b.dims[1];
  std::vector<float> params(b.floats.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) params[size_t(o * in + i)] = b.floats[size_t(i * out + o)];
  const LayerSpec& l = emit_linear(n, x, out, false, std::move(params));
  // An Add of [out] right after it is its bias (a reshape in between moves no feature).
  matmul_layers_[n.output(0)] = layer_index_.at(l.name);
}

void Importer::add(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& a = input(n, 0);
  const Value& b = input(n, 1);
  // 1 + erf(x / sqrt(2)), in GELU.
  for (const auto* p : {&a, &b}) {
    const Value* other = p == &a ? &b : &a;
    if (p->kind == Value::kPattern && p->stage == 2 && is_scalar(*other, 1.0, 0)) {
      Value q = *p;
      q.stage = 3;
      return alias(n, q);
    }
  }
  // MatMul + Add of a [out] constant: the linear layer's bias.
  for (int k = 0; k < 2; ++k) {
    const Value& v = k == 0 ? a : b;
    const Value& c = k == 0 ? b : a;
    auto mm = matmul_layers_.find(n.input(k));
    if (v.kind != Value::kActivation || c.kind != Value::kConstant || mm == matmul_layers_.end())
      continue;
    const int64_t out = v.shape.back();
    if (uses_[n.input(k)] != 1 || c.is_int || !c.unusable.empty() ||
        (c.dims != std::vector<int64_t>{out} && c.dims != std::vector<int64_t>{1, out}))
      continue;
    LayerSpec& l = graph_.layers[mm->second];
    l.params.erase("bias");
    l.init_params.insert(l.init_params.end(), c.floats.begin(), c.floats.end());
    matmul_layers_.erase(mm);
    return alias(n, v);
  }
  if (layernorm_affine(n, a, b) || table_bias(n, a, b) || position_embedding(n, a, b)) return;
  if (causal_mask_add(n)) return mask_causally(n, a.kind == Value::kActivation ? a : b);
  if (fixed_bias_add(n)) return;
  const Value& x = activation(n, 0);
  const Value& y = activation(n, 1);
  if (x.shape != y.shape)
    fail_node(n, fmt::format("inputs {} and {} differ; loom adds activations of one shape only "
                             "(no broadcasting)",
                             batch_shape_text(x.shape), batch_shape_text(y.shape)));
  emit(n, "add", {&x, &y}, x.shape);
}

void Importer::mul(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& a = input(n, 0);
  const Value& b = input(n, 1);
  const char* what =
      "loom reads Mul of two activations (a mul layer), by a scalar constant (a scale layer), "
      "x * sigmoid(x) (SiLU), x * hardsigmoid(x) (Hardswish), a layer normalisation's gain and "
      "GELU's erf form x * 0.5 * (1 + erf(x / sqrt(2))); a product with another constant has "
      "no layer";
  for (int k = 0; k < 2; ++k) {
    const Value& p = k == 0 ? a : b;
    const Value& q = k == 0 ? b : a;
    // x * sigmoid(x)
    if (p.kind == Value::kActivation && q.kind == Value::kActivation && !q.sigmoid_of.empty() &&
        q.sigmoid_of == p.layer) {
      emit(n, "silu", {&p}, p.shape, "SiLU");
      return;
    }
    // x * hardsigmoid(x)
    if (p.kind == Value::kActivation && q.kind == Value::kActivation && !q.hardsigmoid_of.empty() &&
        q.hardsigmoid_of == p.layer) {
      emit(n, "hardswish", {&p}, p.shape, "Hardswish");
      return;
    }
    // x / sqrt(2) as x * (1 / sqrt(2))
    if (p.kind == Value::kActivation && is_scalar(q, std::sqrt(0.5), 1e-4) &&
        read_only_by(n.output(0), "Erf")) {
      Value r;
      r.kind = Value::kPattern;
      r.stage = 1;
      r.layer = p.layer;
      r.shape = p.shape;
      r.node = n.name();
      return alias(n, r);
    }
    // x * (1 + erf(...))
    if (p.kind == Value::kPattern && p.stage == 3 && q.kind == Value::kActivation &&
        q.layer == p.layer) {
      Value r = p;
      r.stage = 4;
      return alias(n, r);
    }
    // (x * (1 + erf(...))) * 0.5
    if (p.kind == Value::kPattern && p.stage == 4 && is_scalar(q, 0.5, 0)) {
      Value x;
      x.layer = p.layer;
      x.shape = p.shape;
      emit(n, "gelu", {&x}, p.shape, "GELU");
      return;
    }
  }
  if (layernorm_affine(n, a, b)) return;
  if (scale_by_constant(n, a, b, false) || scale_by_constant(n, b, a, false)) return;
  // x [C, H, W] times a [C, 1, 1] initializer (ConvNeXt's layer scale): a learned gain per
  // channel, which is a 1x1 convolution of one weight per channel.
  for (int k = 0; k < 2; ++k) {
    const Value& x = k == 0 ? a : b;
    const Value& c = k == 0 ? b : a;
    if (x.kind != Value::kActivation || c.kind != Value::kConstant || c.is_int ||
        !c.unusable.empty() || x.shape.size() != 3 ||
        c.dims != std::vector<int64_t>{x.shape[0], 1, 1})
      continue;
    LayerSpec& l = emit(n, "conv2d", {&x}, x.shape);
    l.params["out"] = cv(x.shape[0]);
    l.params["kernel"] = cv(int64_t(1));
    l.params["groups"] = cv(x.shape[0]);
    l.params["bias"] = cv(false);
    l.init_params = c.floats;
    return;
  }
  if (a.kind != Value::kActivation || b.kind != Value::kActivation) fail_node(n, what);
  // Two activations: one shape, or one of them a gate of 1s on the other's trailing axes (the
  // mul layer's broadcast, squeeze-and-excitation's [C, 1, 1] with [C, H, W]).
  Shape out = Mul::output_shape(a.shape, b.shape);
  if (out.empty())
    fail_node(n, fmt::format("inputs {} and {}: loom multiplies activations of one shape, or "
                             "with one of 1s on the other's trailing axes ([C, 1, 1] with "
                             "[C, H, W])",
                             batch_shape_text(a.shape), batch_shape_text(b.shape)));
  emit(n, "mul", {&a, &b}, std::move(out));
}

void Importer::batchnorm(const onnx::NodeProto& n) {
  only_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  unused_outputs_from(n, 1);
  const Value& x = activation(n, 0);
  if (x.shape.size() < 1 || x.shape.size() > 3)
    fail_node(n, fmt::format("input is {}; loom normalises [batch, features], [batch, C, L] "
                             "and [batch, C, H, W]",
                             batch_shape_text(x.shape)));
  const int64_t c = x.shape[0];
  std::vector<float> params, state;
  for (int k = 1; k <= 4; ++k) {
    const Value& v = constant(n, k);
    if (v.is_int || v.dims != std::vector<int64_t>{c})
      fail_node(n, fmt::format("input '{}' is {}, not [{}] (the input's channels)", n.input(k),
                               dims_text(v.dims), c));
    auto& to = k <= 2 ? params : state;
    to.insert(to.end(), v.floats.begin(), v.floats.end());
  }
  const double eps = attr_float(n, "epsilon", 1e-5);
  // ONNX's momentum weighs the old running statistic, PyTorch's (and loom's) the new batch.
  const double momentum = 1.0 - attr_float(n, "momentum", 0.9);
  if (!(eps > 0 && eps < 1) || !(momentum >= 0 && momentum <= 1))
    fail_node(n, "epsilon or momentum is out of range");
  LayerSpec& l = emit(n, x.shape.size() == 3 ? "batchnorm2d" : "batchnorm1d", {&x}, x.shape);
  l.params["eps"] = cv_float(eps);
  l.params["momentum"] = cv_float(momentum);
  l.init_params = std::move(params);
  l.init_state = std::move(state);
}

void Importer::dropout(const onnx::NodeProto& n) {
  only_attrs(n, {"ratio", "seed"});
  unused_outputs_from(n, 1);
  const Value& x = activation(n, 0);
  double p = attr_float(n, "ratio", 0.5);
  if (has_input(n, 1)) {
    const Value& r = constant(n, 1);
    if (r.floats.size() != 1) fail_node(n, "ratio is not a float scalar");
    p = r.floats[0];
  }
  if (!(p >= 0 && p < 1)) fail_node(n, fmt::format("ratio {} is out of range [0, 1)", p));
  // training_mode (input 3) is left out: loom drops out in training steps and not in
  // evaluation, whatever the export's mode.
  if (p == 0) return alias(n, x);
  LayerSpec& l = emit(n, "dropout", {&x}, x.shape);
  l.params["p"] = cv_float(p);
}

void Importer::concat(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  if (n.input_size() < 1) fail_node_input(n, "it has no inputs");
  const int64_t axis_attr = attr_int(n, "axis", 0);
  if (input(n, 0).kind == Value::kConstant) return fold_concat(n);
  const Value& first = input(n, 0);
  if (first.kind == Value::kPattern && first.stage == Value::kExpanded) {
    // [tokens, D] learned rows before x [T, D], on the positions' axis: a class_token layer.
    const Value& x = n.input_size() == 2 ? activation(n, 1) : first;
    const int64_t rank = int64_t(x.shape.size()) + 1;
    const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
    if (n.input_size() != 2 || x.kind != Value::kActivation || x.shape.size() != 2 ||
        first.shape.size() != 2 || first.shape[1] != x.shape[1] || axis != 1)
      fail_node(
          n, fmt::format("loom reads a Concat of a constant expanded to the batch only as "
                         "learned rows [tokens, D] put before an activation [T, D] on "
                         "axis 1 (ViT's class token); here {} and {} on axis {}",
                         batch_shape_text(first.shape),
                         n.input_size() == 2 ? batch_shape_text(x.shape) : "nothing", axis_attr));
    LayerSpec& l = emit(n, "class_token", {&x}, {first.shape[0] + x.shape[0], x.shape[1]});
    if (first.shape[0] != 1) l.params["count"] = cv(first.shape[0]);
    l.init_params = first.floats;
    return;
  }
  std::vector<const Value*> xs;
  for (int k = 0; k < n.input_size(); ++k) xs.push_back(&activation(n, k));
  const int64_t rank = int64_t(xs[0]->shape.size()) + 1;
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 1 || axis >= rank)
    fail_node(n, fmt::format("axis {} is not an axis of a sample of {}", axis_attr,
                             batch_shape_text(xs[0]->shape)));
  Shape out = xs[0]->shape;
  out[size_t(axis - 1)] = 0;
  for (const Value* v : xs) {
    Shape a = v->shape, b = xs[0]->shape;
    if (a.size() == b.size()) a[size_t(axis - 1)] = b[size_t(axis - 1)] = 0;
    if (a != b)
      fail_node(n, fmt::format("inputs {} and {} differ off axis {}",
                               batch_shape_text(xs[0]->shape), batch_shape_text(v->shape), axis));
    out[size_t(axis - 1)] += v->shape[size_t(axis - 1)];
  }
  if (xs.size() == 1) return alias(n, *xs[0]);
  LayerSpec& l = emit(n, "concat", xs, out);
  if (axis != 1) l.params["axis"] = cv(axis - 1);
}

void Importer::expand(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& c = constant(n, 0);
  const Value& s = constant(n, 1);
  if (s.is_int && std::none_of(s.ints.begin(), s.ints.end(), is_batch)) return fold_expand(n);
  const char* what =
      "loom reads Expand only of a constant [1, ...] to [batch, ...] that keeps each sample's "
      "shape (ViT's class_token.expand(batch, -1, -1))";
  if (!s.is_int || s.dims.size() != 1 || s.ints.size() != c.dims.size() || c.is_int ||
      c.dims.size() < 2 || c.dims[0] != 1 || s.ints.empty() || s.ints[0] != kBatch)
    fail_node(n, fmt::format("{}; here {} to {}", what, dims_text(c.dims), dims_text(s.ints)));
  for (size_t i = 1; i < s.ints.size(); ++i)
    if (s.ints[i] != 1 && s.ints[i] != c.dims[i])
      fail_node(n, fmt::format("{}; here {} to {}", what, dims_text(c.dims), dims_text(s.ints)));
  Value v;
  v.kind = Value::kPattern;
  v.stage = Value::kExpanded;
  v.shape.assign(c.dims.begin() + 1, c.dims.end());
  v.floats = c.floats;
  v.node = n.name();
  alias(n, v);
}

// loom's export writes an add of more than two inputs as one Sum.
void Importer::sum(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() < 1) fail_node_input(n, "it has no inputs");
  std::vector<const Value*> xs;
  for (int k = 0; k < n.input_size(); ++k) {
    xs.push_back(&activation(n, k));
    if (xs.back()->shape != xs[0]->shape)
      fail_node(n, fmt::format("inputs {} and {} differ; loom adds activations of one shape only "
                               "(no broadcasting)",
                               batch_shape_text(xs[0]->shape), batch_shape_text(xs.back()->shape)));
  }
  if (xs.size() == 1) return alias(n, *xs[0]);
  emit(n, "add", xs, xs[0]->shape);
}

void Importer::pad(const onnx::NodeProto& n) {
  only_attrs(n, {"mode"});
  const Value& x = activation(n, 0);
  const Value& p = constant(n, 1);
  const std::string mode = attr_string(n, "mode");
  if (!mode.empty() && mode != "constant")
    fail_node(n, fmt::format("mode '{}' is not read; loom pads with zeros only", mode));
  if (has_input(n, 2) && !is_scalar(constant(n, 2), 0, 0) &&
      !(constant(n, 2).is_int && constant(n, 2).ints == std::vector<int64_t>{0}))
    fail_node(n, "loom pads with zeros only");
  if (has_input(n, 3)) fail_node(n, "loom reads Pad of every axis (no 'axes' input)");
  const size_t rank = x.shape.size() + 1;
  if (!p.is_int || p.ints.size() != 2 * rank)
    fail_node(n, fmt::format("pads {} do not fit an input of rank {}", dims_text(p.ints), rank));
  // Nothing to pad (Swin's padding to whole windows of a map that has them): the input.
  if (std::all_of(p.ints.begin(), p.ints.end(), [](int64_t i) { return i == 0; }))
    return alias(n, x);
  for (int64_t i : p.ints)
    if (i < 0 || i > (1 << 20))
      fail_node(n,
                fmt::format("pads {}: loom pads by 0 to 2^20 zeros (no crop)", dims_text(p.ints)));
  if (p.ints[0] != 0 || p.ints[rank] != 0)
    fail_node(n, fmt::format("pads {} pad the batch axis; loom pads each sample's axes only",
                             dims_text(p.ints)));
  // The same zeros at both ends of H and W of an image, read only by a Conv or AveragePool:
  // their own padding (PyTorch writes avg_pool2d so).
  bool window = rank == 4 && p.ints[1] == 0 && p.ints[1 + rank] == 0;
  for (size_t i = 2; window && i < rank; ++i) window = p.ints[i] == p.ints[i + rank];
  auto readers = readers_.find(n.output(0));
  if (window && readers != readers_.end() && !readers->second.empty())
    for (const std::string& r : readers->second)
      window = window && (r == "Conv" || r == "AveragePool");
  if (window) {
    Value v = x;
    v.kind = Value::kPattern;
    v.stage = Value::kPadded;
    v.pad_h = p.ints[2];
    v.pad_w = p.ints[3];
    v.node = n.name();
    return alias(n, v);
  }
  // Any other zero padding of the sample's axes (Swin's map to whole windows): a pad layer.
  std::vector<int64_t> before(p.ints.begin() + 1, p.ints.begin() + long(rank)),
      after(p.ints.begin() + long(rank) + 1, p.ints.end());
  Shape out = x.shape;
  for (size_t i = 0; i < out.size(); ++i) out[i] += before[i] + after[i];
  LayerSpec& l = emit(n, "pad", {&x}, out);
  l.params["before"] = cv_ints(before);
  l.params["after"] = cv_ints(after);
}

const Value& Importer::padded_activation(const onnx::NodeProto& n, int64_t& pad_h,
                                         int64_t& pad_w) const {
  const Value& v = input(n, 0);
  if (v.kind == Value::kPattern && v.stage == Value::kPadded) {
    pad_h = v.pad_h;
    pad_w = v.pad_w;
    return v;
  }
  return activation(n, 0);
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
