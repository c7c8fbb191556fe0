// The ONNX ops of attention and layer normalisation written op by op, as torch.onnx exports a
// hand-written transformer block: MatMul of two activations, Softmax (after a causal mask made
// by Where), Mul and Div by a scalar constant (scale layers), LayerNormalization and its
// decomposed form (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then Mul by the gain and
// Add of the bias), and the Add of a learned [T, D] table (a position embedding).
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"
#include "loom/nn/layers/attention_parts.h"
#include "loom/nn/layers/relative_position_bias.h"

namespace loom::nn::onnx_import {

void Importer::matmul_of_activations(const onnx::NodeProto& n, const Value& a, const Value& b) {
  Shape out = MatMul::output_shape(a.shape, b.shape);
  if (out.empty())
    fail_node(n, fmt::format("inputs {} and {}: loom multiplies activations [batch, ..., M, K] "
                             "and [batch, ..., K, N] with the same leading axes",
                             batch_shape_text(a.shape), batch_shape_text(b.shape)));
  emit(n, "matmul", {&a, &b}, std::move(out));
}

bool Importer::scale_by_constant(const onnx::NodeProto& n, const Value& a, const Value& b,
                                 bool divide) {
  if (a.kind != Value::kActivation || b.kind != Value::kConstant || b.is_int ||
      b.floats.size() != 1 || !b.unusable.empty())
    return false;
  const double c = b.floats[0];
  const double factor = divide ? 1.0 / c : c;
  if (!std::isfinite(factor)) fail_node(n, fmt::format("the factor {} is not finite", factor));
  if (factor == 1.0) {  // torch.baddbmm's alpha and beta of 1 (nn.MultiheadAttention's mask)
    alias(n, a);
    return true;
  }
  emit(n, "scale", {&a}, a.shape).params["factor"] = cv_float_exact(float(factor));
  return true;
}

void Importer::softmax(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& v = input(n, 0);
  const bool causal = v.kind == Value::kPattern && v.stage == Value::kCausalMasked;
  Value x = causal ? v : activation(n, 0);
  const int64_t rank = int64_t(x.shape.size()) + 1;
  int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1 || rank < 2)
    fail_node(n, fmt::format("axis {} of {}: loom's softmax is over the last axis",
                             attr_int(n, "axis", -1), batch_shape_text(x.shape)));
  x.kind = Value::kActivation;
  LayerSpec& l = emit(n, "softmax", {&x}, x.shape);
  if (causal) l.params["causal"] = cv(true);
}

void Importer::mask_causally(const onnx::NodeProto& n, const Value& x) {
  Value v = x;
  v.kind = Value::kPattern;
  v.stage = Value::kCausalMasked;
  v.node = n.name();
  alias(n, v);
}

// Where of three constants (a mask made at export: masked_fill of a constant, or
// nn.MultiheadAttention turning a bool attn_mask into -inf and 0), with ONNX's broadcasting.
void Importer::fold_where(const onnx::NodeProto& n) {
  const Value& cond = constant(n, 0);
  const Value& a = constant(n, 1);
  const Value& b = constant(n, 2);
  if (!cond.is_int || a.is_int != b.is_int)
    fail_node(n, "loom folds Where of constants with a bool condition and two of one type");
  for (const Value* v : {&cond, &a, &b})
    if (int64_t(v->is_int ? v->ints.size() : v->floats.size()) != elements(v->dims))
      fail_node_input(
          n, fmt::format("a constant of {} has another count of values", dims_text(v->dims)));
  std::vector<int64_t> dims;
  if (!broadcast_dims({&cond.dims, &a.dims, &b.dims}, dims))
    fail_node(n, fmt::format("shapes {}, {} and {} do not broadcast (to at most 2^25 values)",
                             dims_text(cond.dims), dims_text(a.dims), dims_text(b.dims)));
  const int64_t count = elements(dims);
  auto source = [&](const Value& v, int64_t i) {
    return size_t(broadcast_source(dims, v.dims, i));
  };
  Value v;
  v.kind = Value::kConstant;
  v.is_int = a.is_int;
  v.dims = dims;
  for (int64_t i = 0; i < count; ++i) {
    const Value& pick = cond.ints[source(cond, i)] != 0 ? a : b;
    if (v.is_int)
      v.ints.push_back(pick.ints[source(pick, i)]);
    else
      v.floats.push_back(pick.floats[source(pick, i)]);
  }
  alias(n, v);
}

// Where(mask, -inf, scores) (or the mask inverted): the causal mask of attention, when the
// constant mask hides exactly the entries above the diagonal of the scores' [t, t] blocks.
void Importer::where(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& cond = constant(n, 0);
  if (input(n, 1).kind == Value::kConstant && input(n, 2).kind == Value::kConstant)
    return fold_where(n);
  const char* what =
      "loom reads Where only as the causal mask of attention scores: Where(mask, -inf, x) or "
      "Where(mask, x, -inf), the mask a constant that hides the entries above the diagonal of "
      "x's last two axes, followed by a Softmax";
  const Value& a = input(n, 1);
  const Value& b = input(n, 2);
  const bool fill_first = a.kind == Value::kConstant;
  const Value& fill = fill_first ? a : b;
  const Value& x = fill_first ? activation(n, 2) : activation(n, 1);
  if (fill.is_int || fill.floats.size() != 1 || !(std::isinf(fill.floats[0]) && fill.floats[0] < 0))
    fail_node(n, what);
  const size_t r = x.shape.size();
  if (r < 2 || x.shape[r - 1] != x.shape[r - 2] || !cond.is_int || cond.dims.size() < 2)
    fail_node(n, what);
  const int64_t t = x.shape[r - 1];
  const size_t cr = cond.dims.size();
  if (cond.dims[cr - 1] != t || cond.dims[cr - 2] != t || int64_t(cond.ints.size()) != t * t)
    fail_node(n, what);
  // Where picks the fill where the mask is true (fill first) or false (fill second).
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) {
      const bool hidden = (cond.ints[size_t(i * t + j)] != 0) == fill_first;
      if (hidden != (j > i)) fail_node(n, what);
    }
  if (!read_only_by(n.output(0), "Softmax")) fail_node(n, what);
  mask_causally(n, x);
}

bool Importer::causal_mask_add(const onnx::NodeProto& n) const {
  if (n.input_size() != 2 || !read_only_by(n.output(0), "Softmax")) return false;
  for (int k = 0; k < 2; ++k) {
    auto xi = values_.find(n.input(k));
    auto ci = values_.find(n.input(1 - k));
    if (xi == values_.end() || ci == values_.end()) return false;
    const Value& x = xi->second;
    const Value& c = ci->second;
    if (x.kind != Value::kActivation || c.kind != Value::kConstant || c.is_int ||
        !c.unusable.empty() || c.dims.size() < 2)
      continue;
    const std::vector<int64_t> dims = onnx_dims(x);
    const size_t r = dims.size(), cr = c.dims.size();
    const int64_t t = c.dims[cr - 1];
    if (r < 3 || cr > r || c.dims[cr - 2] != t || dims[r - 1] != t || dims[r - 2] != t ||
        int64_t(c.floats.size()) != t * t)
      continue;
    // 0 where a position may look, and a value whose exp is 0 in float (-inf, or the most
    // negative floats some code writes instead) where it may not.
    bool causal = true;
    for (int64_t i = 0; causal && i < t; ++i)
      for (int64_t j = 0; causal && j < t; ++j) {
        const float m = c.floats[size_t(i * t + j)];
        causal = j > i ? m <= -1e9f : m == 0.0f;
      }
    if (causal) return true;
  }
  return false;
}

void Importer::layer_normalization(const onnx::NodeProto& n) {
  only_attrs(n, {"axis", "epsilon", "stash_type"});
  unused_outputs_from(n, 1);
  const Value& x = activation(n, 0);
  const int64_t rank = int64_t(x.shape.size()) + 1;
  int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1)
    fail_node(n, fmt::format("axis {}: loom normalises over the last axis only",
                             attr_int(n, "axis", -1)));
  const int64_t d = x.shape.back();
  std::vector<float> params;
  for (int k = 1; k <= 2; ++k) {
    std::vector<float> v(size_t(d), k == 1 ? 1.0f : 0.0f);
    if (has_input(n, k)) {
      const Value& c = constant(n, k);
      if (c.is_int || c.dims != std::vector<int64_t>{d})
        fail_node(n, fmt::format("input '{}' is {}, not [{}]", n.input(k), dims_text(c.dims), d));
      v = c.floats;
    }
    params.insert(params.end(), v.begin(), v.end());
  }
  const double eps = attr_float(n, "epsilon", 1e-5);
  if (!(eps > 0 && eps < 1)) fail_node(n, "epsilon is out of range");
  LayerSpec& l = emit(n, "layernorm", {&x}, x.shape);
  l.params["eps"] = cv_float(eps);
  l.init_params = std::move(params);
}

bool Importer::layernorm_step(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  auto pattern = [&](int k) -> const Value* {
    if (!has_input(n, k)) return nullptr;
    const Value& v = input(n, k);
    return v.kind == Value::kPattern ? &v : nullptr;
  };
  auto step = [&](const Value& from, int stage) {
    Value v = from;
    v.kind = Value::kPattern;
    v.stage = stage;
    alias(n, v);
    return true;
  };
  auto last_axis_mean = [&](const Value& x) {
    std::vector<int64_t> axes = attr_ints(n, "axes", {});
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == int64_t(x.shape.size())) &&
           attr_int(n, "keepdims", 1) == 1;
  };
  if (op == "ReduceMean") {
    const Value& x = input(n, 0);
    if (x.kind == Value::kActivation && !x.shape.empty() && last_axis_mean(x) &&
        readers_[n.output(0)] == std::vector<std::string>{"Sub"}) {
      Value v = x;
      v.node = n.name();
      return step(v, Value::kLnMean);
    }
    const Value* p = pattern(0);
    if (p && p->stage == Value::kLnSquare && last_axis_mean(*p))
      return step(*p, Value::kLnVariance);
    return false;
  }
  if (op == "Sub") {
    const Value* m = pattern(1);
    if (!m || m->stage != Value::kLnMean) return false;
    const Value& x = input(n, 0);
    if (x.kind != Value::kActivation || x.layer != m->layer)
      fail_node(n, "it subtracts a mean over the last axis from another value than its own");
    return step(*m, Value::kLnCentered);
  }
  if (op == "Pow") {
    const Value* c = pattern(0);
    if (!c || c->stage != Value::kLnCentered) return false;
    if (!is_scalar(input(n, 1), 2.0, 0)) fail_node(n, "layer normalisation squares (Pow 2)");
    return step(*c, Value::kLnSquare);
  }
  if (op == "Add") {
    for (int k = 0; k < 2; ++k) {
      const Value* v = pattern(k);
      if (!v || v->stage != Value::kLnVariance) continue;
      const Value& e = input(n, 1 - k);
      if (e.kind != Value::kConstant || e.is_int || e.floats.size() != 1 ||
          !(e.floats[0] > 0 && e.floats[0] < 1))
        fail_node(n, "layer normalisation adds an epsilon in (0, 1) to the variance");
      Value w = *v;
      w.eps = e.floats[0];
      return step(w, Value::kLnVarianceEps);
    }
    return false;
  }
  if (op == "Sqrt") {
    const Value* v = pattern(0);
    if (!v || v->stage != Value::kLnVarianceEps) return false;
    return step(*v, Value::kLnStd);
  }
  if (op == "Div") {
    const Value* c = pattern(0);
    const Value* s = pattern(1);
    if (!c || !s || c->stage != Value::kLnCentered || s->stage != Value::kLnStd) return false;
    if (c->layer != s->layer) fail_node(n, "it divides by the deviation of another value");
    Value x;
    x.layer = c->layer;
    x.shape = c->shape;
    const int64_t d = x.shape.back();
    std::vector<float> params(size_t(d), 1.0f);
    params.resize(size_t(2 * d), 0.0f);
    LayerSpec& l = emit(n, "layernorm", {&x}, x.shape, "LayerNorm");
    l.params["eps"] = cv_float(s->eps);
    l.init_params = std::move(params);
    layernorm_layers_[n.output(0)] = graph_.layers.size() - 1;
    return true;
  }
  return false;
}

bool Importer::layernorm_affine(const onnx::NodeProto& n, const Value& a, const Value& b) {
  for (int k = 0; k < 2; ++k) {
    auto it = layernorm_layers_.find(n.input(k));
    const Value& c = k == 0 ? b : a;
    const Value& v = k == 0 ? a : b;
    if (it == layernorm_layers_.end() || uses_[n.input(k)] != 1 || c.kind != Value::kConstant ||
        c.is_int || !c.unusable.empty())
      continue;
    const int64_t d = v.shape.back();
    if (c.dims != std::vector<int64_t>{d}) continue;
    LayerSpec& l = graph_.layers[it->second];
    const bool gain = n.op_type() == "Mul";
    // The gain comes before the bias: torch.onnx writes x_hat * weight + bias.
    float* to = l.init_params.data() + (gain ? 0 : d);
    for (int64_t i = 0; i < d; ++i)
      to[i] = gain ? to[i] * c.floats[size_t(i)] : c.floats[size_t(i)];
    const size_t index = it->second;
    layernorm_layers_.erase(it);
    if (gain) layernorm_layers_[n.output(0)] = index;
    alias(n, v);
    return true;
  }
  return false;
}

bool Importer::is_table_bias_add(const onnx::NodeProto& n) const {
  if (n.input_size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    auto x = values_.find(n.input(k)), c = values_.find(n.input(1 - k));
    if (x != values_.end() && c != values_.end() && x->second.kind == Value::kActivation &&
        c->second.kind == Value::kConstant && !c->second.table.empty())
      return true;
  }
  return false;
}

bool Importer::table_bias(const onnx::NodeProto& n, const Value& a, const Value& b) {
  for (int k = 0; k < 2; ++k) {
    const Value& x = k == 0 ? a : b;
    const Value& c = k == 0 ? b : a;
    if (x.kind != Value::kActivation || c.kind != Value::kConstant || c.table.empty()) continue;
    const Value& table = values_.at(c.table);
    const std::string what = fmt::format(
        "it adds {} taken from initializer '{}' {} by a constant index; loom reads that only as "
        "the relative position bias of a w x w window (Swin's, MaxViT's): [heads, w*w, w*w], "
        "from a [(2w - 1)^2, heads] table by Swin's index, added to attention scores",
        dims_text(c.dims), c.table, dims_text(table.dims));
    const size_t r = c.dims.size();
    if (r < 3) fail_node(n, what);
    for (size_t i = 0; i + 3 < r; ++i)
      if (c.dims[i] != 1) fail_node(n, what);
    const int64_t heads = c.dims[r - 3], cells = c.dims[r - 1];
    const auto w = int64_t(std::lround(std::sqrt(double(cells))));
    if (c.dims[r - 2] != cells || w * w != cells ||
        table.dims != std::vector<int64_t>{(2 * w - 1) * (2 * w - 1), heads})
      fail_node(n, what);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < cells; ++i)
        for (int64_t j = 0; j < cells; ++j)
          if (c.table_index[size_t((h * cells + i) * cells + j)] !=
              RelativePositionBias::table_row(w, i, j) * heads + h)
            fail_node(n, what + "; its index is another");
    const size_t xr = x.shape.size();
    if (xr < 3 || x.shape[xr - 3] != heads || x.shape[xr - 2] != cells || x.shape[xr - 1] != cells)
      fail_node(n, fmt::format("{}; the scores are {}", what, batch_shape_text(x.shape)));
    LayerSpec& l = emit(n, "relative_position_bias", {&x}, x.shape);
    l.params["window"] = cv(w);
    l.params["heads"] = cv(heads);
    l.init_params = table.floats;
    return true;
  }
  return false;
}

bool Importer::position_embedding(const onnx::NodeProto& n, const Value& a, const Value& b) {
  for (int k = 0; k < 2; ++k) {
    const Value& x = k == 0 ? a : b;
    const Value& c = k == 0 ? b : a;
    if (x.kind != Value::kActivation || c.kind != Value::kConstant || c.is_int ||
        !c.unusable.empty() || x.shape.size() != 2 || !weights_.count(n.input(1 - k)))
      continue;
    std::vector<int64_t> dims = c.dims;
    if (dims.size() == 3 && dims[0] == 1) dims.erase(dims.begin());
    if (dims != std::vector<int64_t>(x.shape.begin(), x.shape.end())) continue;
    LayerSpec& l = emit(n, "position_embedding", {&x}, x.shape);
    l.params["max_len"] = cv(x.shape[0]);
    l.params["dim"] = cv(x.shape[1]);
    l.init_params = c.floats;
    return true;
  }
  return false;
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
