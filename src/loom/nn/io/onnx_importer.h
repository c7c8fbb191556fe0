// The ONNX importer's reading state, shared by its source files: onnx_import.cc (the graph walk,
// values, attributes and the model's input), onnx_import_layers.cc (the ops that become layers),
// onnx_import_layout.cc (the ops that move values between layouts: Reshape, Transpose, Slice,
// Split, Gather, ReduceMean), onnx_import_attention.cc (attention and layer normalisation
// written op by op) and onnx_import_folds.cc (the shape arithmetic folded at import). Internal to
// nn/io: include it from those files only, and only where LOOM_HAVE_ONNX is 1.
#pragma once

#include <onnx/onnx_pb.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/nn/io/onnx_import.h"

namespace loom::nn::onnx_import {

// Torch 1.13 writes IR 7 (opsets 13, 14) or 8; the ops below are read as opsets 11 to 17
// define them (Unsqueeze's axes and Dropout's ratio moved from attributes to inputs there).
constexpr int64_t kMinIr = 3, kMaxIr = 8;
constexpr int64_t kMinOpset = 11, kMaxOpset = 17;
// The batch axis inside a folded shape (Shape of an activation): its size is unknown. The batch
// size times m (nn.MultiheadAttention's view(T, B * heads, d)) is kBatch + m - 1; every integer
// below kBatchEnd is such a multiple, and integers read from a file are clamped above it.
constexpr int64_t kBatch = std::numeric_limits<int64_t>::min();
constexpr int64_t kBatchEnd = kBatch + (int64_t(1) << 40);
inline bool is_batch(int64_t x) {
  return x < kBatchEnd;
}
inline int64_t batch_factor(int64_t x) {
  return x - kBatch + 1;
}
inline int64_t batch_times(int64_t m) {
  return kBatch + m - 1;
}
// No tensor of a model loom trains has more elements; larger claims are a broken file.
constexpr int64_t kMaxElements = int64_t(1) << 31;
// No constant computed at import from numbers (Range, ConstantOfShape, Expand, a broadcast)
// has more elements: the largest a network makes from its input's shape is an attention mask
// ([4096, 4096] is 16.8M); larger claims are a broken file and would hold gigabytes.
constexpr int64_t kMaxComputed = int64_t(1) << 25;

inline std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i)
    s +=
        (i ? ", " : "") + (!is_batch(d[i])           ? std::to_string(d[i])
                           : batch_factor(d[i]) == 1 ? std::string("batch")
                                                     : fmt::format("batch*{}", batch_factor(d[i])));
  return s + "]";
}

// ONNX's (numpy's) broadcasting: the shape `shapes` broadcast to, false if they do not or the
// result has over kMaxComputed elements (onnx_import_fold_tensors.cc).
bool broadcast_dims(const std::vector<const std::vector<int64_t>*>& shapes,
                    std::vector<int64_t>& out);
// The flat index, in a tensor of `dims`, of the element that broadcasts to element i of `out`.
int64_t broadcast_source(const std::vector<int64_t>& out, const std::vector<int64_t>& dims,
                         int64_t i);

inline std::string batch_shape_text(const Shape& s) {
  std::vector<int64_t> d = {kBatch};
  d.insert(d.end(), s.begin(), s.end());
  return dims_text(d);
}

inline int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A layer name from an ONNX name: "/layer1/conv1/Conv" -> "layer1_conv1_Conv".
inline std::string sanitize(const std::string& name) {
  std::string s;
  for (char c : name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (keep)
      s += c;
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

// What an ONNX value name stands for while the nodes are read.
struct Value {
  enum Kind { kActivation, kConstant, kPattern };
  Kind kind = kActivation;
  // kActivation: the layer that computes it ("input": the model's input) and its per-sample
  // shape; sigmoid_of: for a Sigmoid's output, the layer it is the sigmoid of (SiLU).
  std::string layer;
  Shape shape;
  std::string sigmoid_of;
  // hardsigmoid_of: for a HardSigmoid's output, the layer it is the hardsigmoid of (Hardswish
  // written as x * HardSigmoid(x), as opsets before 14 must).
  std::string hardsigmoid_of;
  // kConstant: an initializer, a Constant or a folded shape computation. Integers in ints,
  // everything else in floats; kBatch in ints stands for the batch size.
  std::vector<int64_t> dims;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  bool is_int = false;
  std::string unusable;  // why the constant cannot be used (its element type), or empty
  // kConstant: float values taken from the initializer `table` by Gather (and moved by Reshape,
  // Transpose, Unsqueeze, Slice): element k is the table's flat element table_index[k]. A layer
  // that learns them learns the table (Swin's and MaxViT's relative position bias).
  std::string table;
  std::vector<int64_t> table_index;
  // kActivation: the ONNX tensor's axes when they are not [batch] + shape (a layout view, made
  // by a Transpose or Reshape that moves or merges the batch axis, as nn.MultiheadAttention
  // does). Each axis lists the atoms it merges, in row-major order: atom 0 is the batch axis of
  // the stored tensor, atom i its axis shape[i - 1]. An empty list is an axis of size 1; an atom
  // in no axis has size 1. Empty: no view, the ONNX tensor is the stored one.
  std::vector<std::vector<int>> view;
  // kPattern: a step of the erf form of GELU, x * 0.5 * (1 + erf(x / sqrt(2))), which loom
  // reads only as a whole: stage 1 = x / sqrt(2), 2 = erf of it, 3 = 1 + that, 4 = x * that.
  // Or kPadded: x zero-padded by pad_h, pad_w at both ends, which loom reads only as the padding
  // of the Conv or AveragePool that follows (PyTorch writes avg_pool2d as Pad + AveragePool).
  static constexpr int kPadded = 10;
  // Or a step of layer normalisation written op by op (torch.onnx before opset 17), read only
  // as a whole: kLnMean = ReduceMean(x) over the last axis, kLnCentered = x - that,
  // kLnSquare = that squared, kLnVariance = its ReduceMean, kLnVarianceEps = that + eps,
  // kLnStd = its Sqrt; Div(centered, std) is the layernorm layer.
  static constexpr int kLnMean = 20, kLnCentered = 21, kLnSquare = 22, kLnVariance = 23,
                       kLnVarianceEps = 24, kLnStd = 25;
  // Or attention scores with the causal mask applied (Where(mask, -inf, x)), read only by a
  // Softmax, which becomes a causal softmax layer.
  static constexpr int kCausalMasked = 30;
  // Or a constant expanded to the batch (ViT's class_token.expand(batch, -1, -1)): its
  // per-sample values in floats, their shape in shape; read only by a Concat before an
  // activation.
  static constexpr int kExpanded = 40;
  int stage = 0;
  int64_t pad_h = 0, pad_w = 0;
  double eps = 0;    // kLnVarianceEps, kLnStd
  std::string node;  // the node that started the pattern, for errors
};

struct Attrs {
  const onnx::NodeProto& node;
  const onnx::AttributeProto* find(const std::string& name) const {
    for (const auto& a : node.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
};

class Importer {
 public:
  Importer(std::string file, Shape input_shape)
      : file_(std::move(file)), input_shape_(std::move(input_shape)) {}

  GraphSpec run(const onnx::ModelProto& model);

 private:
  [[noreturn]] void fail_input(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", file_, what));
  }
  [[noreturn]] void fail_config(const std::string& what) const {
    throw ConfigError(fmt::format("{}: {}", file_, what));
  }
  std::string node_text(const onnx::NodeProto& n) const {
    return fmt::format("node '{}' ({})", n.name(), n.op_type());
  }
  [[noreturn]] void fail_node(const onnx::NodeProto& n, const std::string& what) const {
    throw ConfigError(fmt::format("{}: {}: {}", file_, node_text(n), what));
  }
  [[noreturn]] void fail_node_input(const onnx::NodeProto& n, const std::string& what) const {
    throw InputError(fmt::format("{}: {}: {}", file_, node_text(n), what));
  }

  void check_versions(const onnx::ModelProto& model);
  void read_input(const onnx::GraphProto& g);
  Value tensor_value(const onnx::TensorProto& t, const std::string& what) const;
  // The bytes of a tensor whose data is in a file beside the model (ONNX external data).
  std::string external_data(const onnx::TensorProto& t, const std::string& what) const;
  void read_node(const onnx::NodeProto& n);

  // Inputs and attributes.
  bool has_input(const onnx::NodeProto& n, int k) const {
    return k < n.input_size() && !n.input(k).empty();
  }
  const Value& input(const onnx::NodeProto& n, int k) const;
  const Value& activation(const onnx::NodeProto& n, int k) const;
  const Value& constant(const onnx::NodeProto& n, int k) const;
  int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def) const;
  double attr_float(const onnx::NodeProto& n, const std::string& name, double def) const;
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                                 std::vector<int64_t> def) const;
  std::string attr_string(const onnx::NodeProto& n, const std::string& name) const;
  void only_attrs(const onnx::NodeProto& n, std::initializer_list<const char*> known) const;
  void unused_outputs_from(const onnx::NodeProto& n, int first) const;
  static bool is_scalar(const Value& v, double x, double tol) {
    return v.kind == Value::kConstant && v.floats.size() == 1 && !v.is_int &&
           std::fabs(v.floats[0] - x) <= tol;
  }

  // Results.
  void define(const std::string& name, Value v);
  void alias(const onnx::NodeProto& n, const Value& v) { define(n.output(0), v); }
  // `as`: the name of a layer fused from several nodes ("SiLU"), put where the last node's
  // name has its op type ("/act/Mul" -> "act_SiLU").
  // `output`: which output of n the layer computes; kInner: none, the layer is a step inside
  // the node (the reshapes around a linear), its value given by inner_value().
  static constexpr int kInner = -1;
  LayerSpec& emit(const onnx::NodeProto& n, const std::string& type,
                  const std::vector<const Value*>& inputs, Shape out_shape,
                  const std::string& as = "", int output = 0);
  // x's values as another per-sample shape, a layer inside n (flatten for one axis, else
  // reshape); the result has no view.
  Value emit_reshape(const onnx::NodeProto& n, const Value& x, const Shape& shape,
                     const std::string& as = "") {
    LayerSpec& l = emit(n, shape.size() == 1 ? "flatten" : "reshape", {&x}, shape, as, kInner);
    if (shape.size() > 1) l.params["shape"] = cv_ints(shape);
    return inner_value(shape);
  }
  Value inner_value(Shape shape) const {
    Value v;
    v.layer = graph_.layers.back().name;
    v.shape = std::move(shape);
    return v;
  }
  // A float attribute as the decimal a person wrote (0.1, not 0.10000000149011612).
  ConfigValue cv_float(double x) const { return cv(std::stod(fmt::format("{:.7g}", x))); }
  // A float weight as the shortest decimal that reads back as the same float (a scale factor:
  // the imported layer computes the file's bits).
  ConfigValue cv_float_exact(float x) const {
    for (int digits = 6; digits < 9; ++digits) {
      const double d = std::stod(fmt::format("{:.{}g}", x, digits));
      if (float(d) == x) return cv(d);
    }
    return cv(std::stod(fmt::format("{:.9g}", x)));
  }
  ConfigValue cv(ConfigScalar x) const {
    ConfigValue c;
    c.value = std::move(x);
    c.where = where_;
    return c;
  }
  ConfigValue cv_ints(const std::vector<int64_t>& v) const {
    ConfigValue c;
    c.is_array = true;
    c.array.assign(v.begin(), v.end());
    c.where = where_;
    return c;
  }
  ConfigValue cv_pair(int64_t h, int64_t w) const {
    if (h == w) return cv(h);
    ConfigValue c;
    c.is_array = true;
    c.array = {h, w};
    c.where = where_;
    return c;
  }

  // Op readers.
  void conv(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n, bool max);
  void gemm(const onnx::NodeProto& n);
  void matmul(const onnx::NodeProto& n);
  // A linear layer on x's last axis (W as [out, in], then the bias if `bias`), as output 0 of
  // n; leading axes beyond one are positions, reshaped around it.
  LayerSpec& emit_linear(const onnx::NodeProto& n, const Value& x, int64_t out, bool bias,
                         std::vector<float> params);
  void add(const onnx::NodeProto& n);
  void mul(const onnx::NodeProto& n);
  void batchnorm(const onnx::NodeProto& n);
  void dropout(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void reshape(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  void sum(const onnx::NodeProto& n);
  void pad(const onnx::NodeProto& n);
  void transpose(const onnx::NodeProto& n);
  void slice(const onnx::NodeProto& n);
  void split(const onnx::NodeProto& n);
  void reduce_mean(const onnx::NodeProto& n);
  void gather(const onnx::NodeProto& n);
  // onnx_import_attention.cc: attention and layer normalisation written op by op.
  void matmul_of_activations(const onnx::NodeProto& n, const Value& a, const Value& b);
  void softmax(const onnx::NodeProto& n);
  void where(const onnx::NodeProto& n);
  void fold_where(const onnx::NodeProto& n);
  // Add of a constant causal mask (0 on and below the diagonal, -inf above) to attention
  // scores, read only by a Softmax (nn.MultiheadAttention's attn_mask): true if n is one.
  bool causal_mask_add(const onnx::NodeProto& n) const;
  // Marks attention scores x as causally masked by node n.
  void mask_causally(const onnx::NodeProto& n, const Value& x);
  void layer_normalization(const onnx::NodeProto& n);
  // The decomposed layer normalisation's steps (Value::kLnMean...): true if n is one.
  bool layernorm_step(const onnx::NodeProto& n);
  // Mul by [D] or Add of [D] right after a layernorm: its gain or bias. True if folded.
  bool layernorm_affine(const onnx::NodeProto& n, const Value& a, const Value& b);
  // Add of table entries [..., heads, w*w, w*w] (table_index) to attention scores: Swin's
  // relative position bias, when the index is its formula. True if n is one.
  bool table_bias(const onnx::NodeProto& n, const Value& a, const Value& b);
  bool is_table_bias_add(const onnx::NodeProto& n) const;
  // Add of a constant computed in the file (Swin's shifted-window mask) to an activation, the
  // same for every sample: a fixed_bias layer holding it in the activation's stored order. True
  // if n is one (onnx_import_view.cc).
  bool fixed_bias_add(const onnx::NodeProto& n);
  // Add of an initializer [T, D] (or [1, T, D], or rows cut from one: weights_) to [T, D]: a
  // position embedding. True if so.
  bool position_embedding(const onnx::NodeProto& n, const Value& a, const Value& b);
  // Mul or Div of an activation by a scalar constant: a scale layer. True if so.
  bool scale_by_constant(const onnx::NodeProto& n, const Value& a, const Value& b, bool divide);
  // Transpose's `perm` for `rank` axes (its default reverses them); empty if it is not an order
  // of the axes.
  std::vector<int64_t> transpose_perm(const onnx::NodeProto& n, int64_t rank) const {
    std::vector<int64_t> perm = attr_ints(n, "perm", {});
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    std::vector<bool> seen(size_t(rank), false);
    if (int64_t(perm.size()) != rank) return {};
    for (int64_t a : perm) {
      if (a < 0 || a >= rank || seen[size_t(a)]) return {};
      seen[size_t(a)] = true;
    }
    return perm;
  }
  // Every reader of value `name` is an op of type `op`.
  bool read_only_by(const std::string& name, const char* op) const {
    auto it = readers_.find(name);
    if (it == readers_.end()) return false;
    for (const std::string& r : it->second)
      if (r != op) return false;
    return true;
  }
  // A [C, 1, 1] value of a globalavgpool2d with keep_dims read only by node n (a Flatten, a
  // Reshape to [batch, C]): the pool drops keep_dims and n becomes nothing. False otherwise.
  bool squeeze_kept_pool(const onnx::NodeProto& n, const Value& x);
  // Elements [start, end) of ONNX axis `axis` (not the batch's) of x as output `output` of n;
  // `drop`: the axis goes (a Gather of one index). kInner: the value is returned, not defined.
  Value emit_slice(const onnx::NodeProto& n, const Value& x, int64_t axis, int64_t start,
                   int64_t end, int output, bool drop = false);
  // Input 0 of a Conv or pooling node, with the padding of a Pad before it (0 if none).
  const Value& padded_activation(const onnx::NodeProto& n, int64_t& pad_h, int64_t& pad_w) const;
  // onnx_import_view.cc: layout views. read_view_node reads n where a view is made or read
  // (true), or turns its inputs' views into stored tensors for the readers above (false).
  bool read_view_node(const onnx::NodeProto& n);
  void view_transpose(const onnx::NodeProto& n, const Value& x);
  Value view_transposed(const Value& x, const std::vector<int64_t>& perm) const;
  // x as ONNX's Reshape to `target` gives it (a reshape layer inside n where a stored axis is cut).
  Value view_reshaped(const onnx::NodeProto& n, const Value& x, std::vector<int64_t> target);
  // The batched product of a [..., M, K] and b [..., K, N] (a matmul layer inside n, with the
  // transposes and reshapes its stored inputs need).
  Value view_product(const onnx::NodeProto& n, const Value& a, const Value& b);
  void einsum(const onnx::NodeProto& n);
  // x without its stored axes of size 1 (a reshape layer inside n), its view kept.
  Value squeezed(const onnx::NodeProto& n, const Value& x);
  // Reads n on the stored tensors of its view inputs (ops per element, or along the last
  // `last_axes` axes, which are stored last first), then gives its outputs the first view
  // input's axes.
  void read_on_storage(const onnx::NodeProto& n, int last_axes);
  // x's stored axes in `order` (order[0] = 0, the batch): a transpose layer inside n.
  Value arrange(const onnx::NodeProto& n, const Value& x, const std::vector<int>& order);
  // x's stored axes [first, first + count) as one: a reshape layer inside n.
  Value merge_atoms(const onnx::NodeProto& n, const Value& x, int first, int count);
  // x with its last `count` ONNX axes as as many stored axes, the last.
  Value last_axes_stored(const onnx::NodeProto& n, const Value& x, int count);
  // x stored in its ONNX axes' order, the atoms of each axis but the batch merged into one: the
  // fewest stored axes its view allows (x itself where the batch does not come first).
  Value compacted(const onnx::NodeProto& n, const Value& x);
  // x as a stored tensor with the ONNX axes (no view), for the readers that read only those.
  Value materialized(const onnx::NodeProto& n, const Value& x);
  // x's ONNX dims, the batch as kBatch (times the axes merged with it).
  std::vector<int64_t> onnx_dims(const Value& x) const;
  void fold_shape(const onnx::NodeProto& n);
  void fold_gather(const onnx::NodeProto& n);
  void fold_unsqueeze(const onnx::NodeProto& n);
  void fold_cast(const onnx::NodeProto& n);
  // onnx_import_fold_tensors.cc: constants of any rank. An elementwise op whose inputs are all
  // constants (folds_elementwise), with broadcasting; integers may hold the batch size, which
  // only Add, Sub, Mul, Div (batch_arithmetic) and Equal take.
  bool folds_elementwise(const onnx::NodeProto& n) const;
  // constant(n, k), checked to hold as many values as its dims say.
  const Value& whole_constant(const onnx::NodeProto& n, int k) const;
  void fold_elementwise(const onnx::NodeProto& n);
  int64_t batch_arithmetic(const onnx::NodeProto& n, int64_t x, int64_t y) const;
  void fold_range(const onnx::NodeProto& n);
  void fold_scatter_nd(const onnx::NodeProto& n);
  // Expand of a constant to a constant shape without the batch.
  void fold_expand(const onnx::NodeProto& n);
  void fold_concat(const onnx::NodeProto& n);
  void fold_slice(const onnx::NodeProto& n);
  void fold_reshape(const onnx::NodeProto& n);
  void fold_constant_of_shape(const onnx::NodeProto& n);
  // Expand of a constant [1, ...] to [batch, ...]: learned rows the same in every sample, read
  // only as the first input of a Concat (a class_token layer).
  void expand(const onnx::NodeProto& n);
  // Transpose of a constant: the weights of nn.Linear on [batch, positions, features], which
  // torch.onnx writes as MatMul(x, Transpose(W)).
  void fold_transpose(const onnx::NodeProto& n);
  void constant_node(const onnx::NodeProto& n);
  // The 2-D window attributes of Conv and pooling: {h, w} pairs, pads symmetric.
  struct Window {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  };
  Window window(const onnx::NodeProto& n, int64_t kh, int64_t kw) const;

  std::string file_;
  Shape input_shape_;
  std::string where_;  // of the node being read
  // The batch size of an export without dynamic axes (0: none): constant folding writes it
  // into Reshape targets where it stands for the batch.
  int64_t static_batch_ = 0;
  std::map<std::string, Value> values_;
  std::set<std::string> initializers_;
  // Initializers and the constants folded from them by moving or cutting their entries (Slice,
  // Unsqueeze, Reshape, Transpose, Gather...): values a layer may learn (a position table).
  // Other constants are computed in the file and stay fixed (fixed_bias_add).
  std::set<std::string> weights_;
  std::map<std::string, int> uses_;  // readers of each value name (the graph output counts)
  std::map<std::string, std::vector<std::string>> readers_;  // their op types
  // A layernorm's output (or its output times the gain) -> the layer, while its gain and bias
  // may still come: the Mul by [D] and the Add of [D] of torch.onnx's decomposed form.
  std::map<std::string, size_t> layernorm_layers_;
  GraphSpec graph_;
  std::map<std::string, size_t> layer_index_;  // layer name -> index in graph_.layers
  std::set<std::string> names_;
  std::map<std::string, size_t> matmul_layers_;  // MatMul output -> its bias-less linear layer
};

}  // namespace loom::nn::onnx_import
