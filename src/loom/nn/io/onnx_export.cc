#include "loom/nn/io/onnx_export.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/nn/layers/activation.h"
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

#if LOOM_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#endif

namespace loom::nn {

#if !LOOM_HAVE_ONNX

bool onnx_export_built() {
  return false;
}

std::string onnx_model_bytes(const Model&, const float*, const float*, const OnnxExportOptions&) {
  throw ConfigError(
      "this loom was built without ONNX export; install libonnx-dev and libprotobuf-dev "
      "(scripts/setup) and rebuild");
}

void export_onnx(const Model& model, const float* params, const float* state, const std::string&,
                 const OnnxExportOptions& options) {
  onnx_model_bytes(model, params, state, options);
}

#else

bool onnx_export_built() {
  return true;
}

namespace {

static_assert(std::endian::native == std::endian::little,
              "ONNX raw_data is little-endian; the export copies floats as they lie in memory");

// IR version 7 is the one that goes with opset 13 (ONNX's versioning table).
constexpr int64_t kIrVersion = 7;

class Exporter {
 public:
  Exporter(const Model& model, const float* params, const float* state,
           const OnnxExportOptions& options)
      : model_(model), params_(params), state_(state), options_(options) {}

  onnx::ModelProto run();

 private:
  using Names = std::vector<std::string>;

  // A value or initializer name not yet taken: `base`, else base_2, base_3, ...
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 2; !taken_.insert(name).second; ++k) name = fmt::format("{}_{}", base, k);
    return name;
  }
  onnx::NodeProto* node(const std::string& op, const std::string& name, const Names& inputs,
                        const std::string& output) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& in : inputs) n->add_input(in);
    n->add_output(output);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  // A float32 initializer of `dims` from `data`; returns its name.
  std::string initializer(const std::string& name, const std::vector<int64_t>& dims,
                          const float* data) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(fresh(name));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(data, size_t(n) * sizeof(float));
    return t->name();
  }
  // A 1-D int64 initializer (a shape, a permutation, slice bounds); returns its name.
  std::string int_list(const std::string& name, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(fresh(name));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }
  // A bool initializer of `dims` (a mask).
  std::string bool_tensor(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<uint8_t>& v) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(fresh(name));
    t->set_data_type(onnx::TensorProto::BOOL);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(v.data(), v.size());
    return t->name();
  }
  // A scalar float constant shared by every layer that needs it (GELU's sqrt(2), 1, 0.5).
  std::string scalar(const std::string& name, float v) {
    auto it = scalars_.find(name);
    if (it != scalars_.end()) return it->second;
    return scalars_[name] = initializer(name, {}, &v);
  }
  static void set_shape(onnx::ValueInfoProto* v, const std::string& name, int64_t batch,
                        const Shape& shape) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* s = tt->mutable_shape();
    if (batch > 0)
      s->add_dim()->set_dim_value(batch);
    else
      s->add_dim()->set_dim_param("batch");
    for (int64_t d : shape) s->add_dim()->set_dim_value(d);
  }
  [[noreturn]] void fail(int i, const std::string& what) const {
    throw ConfigError(fmt::format("layer '{}' ({}): {}", model_.layer_name(i),
                                  model_.layers()[size_t(i)]->describe(), what));
  }

  void layer(int i, const Names& in, const std::string& out);
  void pool(int i, const Pool2dBase& p, bool max, const Names& in, const std::string& out);

  const Model& model_;
  const float* params_;
  const float* state_;
  const OnnxExportOptions& options_;
  onnx::GraphProto* graph_ = nullptr;
  std::set<std::string> taken_;
  std::map<std::string, std::string> scalars_;
  const float* layer_params_ = nullptr;  // of the layer being written
  const float* layer_state_ = nullptr;
};

// What each layer computes in evaluation, as ONNX nodes. The last node of a layer carries the
// layer's name, so loom's importer names the layer it reads back the same.
void Exporter::layer(int i, const Names& in, const std::string& out) {
  const Layer& l = *model_.layers()[size_t(i)];
  const std::string& name = model_.layer_name(i);
  if (const auto* lin = dynamic_cast<const Linear*>(&l); lin && model_.output_shape(i).size() > 1) {
    // Over the last axis of [positions, features]: MatMul by W^T [in, out], then the bias, as
    // torch.onnx writes nn.Linear on three axes (Gemm takes matrices only).
    const int64_t n_in = lin->in_features(), n_out = lin->out_features();
    std::vector<float> wt(size_t(n_in * n_out));
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t k = 0; k < n_in; ++k) wt[size_t(k * n_out + o)] = layer_params_[o * n_in + k];
    const Names mm = {in[0], initializer(name + ".weight_t", {n_in, n_out}, wt.data())};
    if (!lin->has_bias()) {
      node("MatMul", name, mm, out);
      return;
    }
    // The MatMul carries the layer's name: the importer makes the layer there and folds the
    // Add into it as its bias.
    const std::string product = fresh(name + "/matmul");
    node("MatMul", name, mm, product);
    node("Add", name + "/Add",
         {product, initializer(name + ".bias", {n_out}, layer_params_ + n_in * n_out)}, out);
    return;
  }
  if (const auto* lin = dynamic_cast<const Linear*>(&l)) {
    // Gemm with transB: loom's W is [out, in], as PyTorch's (and torch.onnx's) is.
    const int64_t n_in = lin->in_features(), n_out = lin->out_features();
    Names ins = {in[0], initializer(name + ".weight", {n_out, n_in}, layer_params_)};
    if (lin->has_bias())
      ins.push_back(initializer(name + ".bias", {n_out}, layer_params_ + n_in * n_out));
    attr(node("Gemm", name, ins, out), "transB", int64_t(1));
    return;
  }
  if (const auto* conv = dynamic_cast<const Conv2d*>(&l)) {
    const Conv2dOptions& o = conv->options();
    const int64_t wn = o.out_channels * (o.in_channels / o.groups) * o.kernel_h * o.kernel_w;
    Names ins = {in[0],
                 initializer(name + ".weight",
                             {o.out_channels, o.in_channels / o.groups, o.kernel_h, o.kernel_w},
                             layer_params_)};
    if (o.bias) ins.push_back(initializer(name + ".bias", {o.out_channels}, layer_params_ + wn));
    onnx::NodeProto* n = node("Conv", name, ins, out);
    attr(n, "kernel_shape", std::vector<int64_t>{o.kernel_h, o.kernel_w});
    attr(n, "strides", std::vector<int64_t>{o.stride_h, o.stride_w});
    attr(n, "pads", std::vector<int64_t>{o.pad_h, o.pad_w, o.pad_h, o.pad_w});
    attr(n, "dilations", std::vector<int64_t>{o.dilation_h, o.dilation_w});
    attr(n, "group", o.groups);
    return;
  }
  if (const auto* bn = dynamic_cast<const BatchNorm*>(&l)) {
    // Evaluation: the running statistics normalise. ONNX's momentum weighs the running
    // statistic, loom's (PyTorch's) the batch; it matters only to a runtime that trains.
    const int64_t c = bn->channels();
    Names ins = {in[0], initializer(name + ".weight", {c}, layer_params_),
                 initializer(name + ".bias", {c}, layer_params_ + c),
                 initializer(name + ".running_mean", {c}, layer_state_),
                 initializer(name + ".running_var", {c}, layer_state_ + c)};
    onnx::NodeProto* n = node("BatchNormalization", name, ins, out);
    attr(n, "epsilon", bn->eps());
    attr(n, "momentum", 1.0f - bn->momentum());
    return;
  }
  if (const auto* p = dynamic_cast<const MaxPool2d*>(&l)) return pool(i, *p, true, in, out);
  if (const auto* p = dynamic_cast<const AvgPool2d*>(&l)) return pool(i, *p, false, in, out);
  if (const auto* gp = dynamic_cast<const GlobalAvgPool2d*>(&l); gp && gp->keep_dims()) {
    node("GlobalAveragePool", name, in, out);
    return;
  }
  if (dynamic_cast<const GlobalAvgPool2d*>(&l)) {
    // ONNX keeps the 1x1 plane, loom's layer gives [C].
    // The pool node carries the layer's name: loom's importer reads it back as the layer, and
    // the Flatten as a flatten layer after it (the identity on [C]).
    const std::string pooled = fresh(name + "/pooled");
    node("GlobalAveragePool", name, {in[0]}, pooled);
    attr(node("Flatten", name + "/Flatten", {pooled}, out), "axis", int64_t(1));
    return;
  }
  if (dynamic_cast<const Add*>(&l)) {
    // Add takes two inputs, Sum any number (one node, so the importer reads one layer back).
    node(in.size() == 2 ? "Add" : "Sum", name, in, out);
    return;
  }
  if (dynamic_cast<const MatMul*>(&l)) {
    node("MatMul", name, in, out);
    return;
  }
  if (const auto* sm = dynamic_cast<const Softmax*>(&l)) {
    if (!sm->causal()) {
      attr(node("Softmax", name, in, out), "axis", int64_t(-1));
      return;
    }
    // The causal mask as torch.onnx writes a masked_fill: Where(above the diagonal, -inf, x).
    const int64_t t = model_.output_shape(i).back();
    std::vector<uint8_t> above(size_t(t * t));
    for (int64_t r = 0; r < t; ++r)
      for (int64_t c = 0; c < t; ++c) above[size_t(r * t + c)] = c > r;
    const std::string masked = fresh(name + "/masked");
    // -inf as a Constant node: an initializer holding Inf reads as a broken weight.
    const std::string minus_inf = fresh(name + "/minus_inf");
    onnx::NodeProto* c = node("Constant", name + "/Constant", {}, minus_inf);
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(-std::numeric_limits<float>::infinity());
    node("Where", name + "/Where",
         {bool_tensor(name + ".causal_mask", {t, t}, above), minus_inf, in[0]}, masked);
    attr(node("Softmax", name, {masked}, out), "axis", int64_t(-1));
    return;
  }
  if (const auto* sc = dynamic_cast<const Scale*>(&l)) {
    const float f = sc->factor();
    node("Mul", name, {in[0], initializer(name + ".factor", {}, &f)}, out);
    return;
  }
  if (const auto* ln = dynamic_cast<const LayerNorm*>(&l)) {
    // (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, in the ops of opset 13
    // (LayerNormalization is an op from opset 17) and in torch.onnx's order, which loom's
    // importer reads back as one layernorm layer.
    const int64_t d = model_.output_shape(i).back();
    const std::vector<int64_t> last = {-1};
    const std::string mean = fresh(name + "/mean"), centered = fresh(name + "/centered"),
                      square = fresh(name + "/square"), var = fresh(name + "/var"),
                      var_eps = fresh(name + "/var_eps"), std_dev = fresh(name + "/std"),
                      normed = fresh(name + "/normed"), scaled = fresh(name + "/scaled");
    attr(node("ReduceMean", name + "/ReduceMean", in, mean), "axes", last);
    node("Sub", name + "/Sub", {in[0], mean}, centered);
    node("Pow", name + "/Pow", {centered, scalar("const.two", 2.0f)}, square);
    attr(node("ReduceMean", name + "/ReduceMean_1", {square}, var), "axes", last);
    const float eps = ln->eps();
    node("Add", name + "/Add", {var, initializer(name + ".eps", {}, &eps)}, var_eps);
    node("Sqrt", name + "/Sqrt", {var_eps}, std_dev);
    node("Div", name, {centered, std_dev}, normed);
    node("Mul", name + "/Mul", {normed, initializer(name + ".weight", {d}, layer_params_)}, scaled);
    node("Add", name + "/Add_1", {scaled, initializer(name + ".bias", {d}, layer_params_ + d)},
         out);
    return;
  }
  if (dynamic_cast<const PositionEmbedding*>(&l)) {
    // The rows the input's positions use: the file is for inputs of this length.
    const Shape& shape = model_.output_shape(i);
    node("Add", name, {in[0], initializer(name + ".weight", {shape[0], shape[1]}, layer_params_)},
         out);
    return;
  }
  if (const auto* ct = dynamic_cast<const ClassToken*>(&l)) {
    // torch.cat([rows.expand(batch, -1, -1), x], dim=1), as torchvision's ViT writes its class
    // token: the rows [1, count, dim] expanded to the batch the input's shape gives.
    const int64_t count = ct->count(), dim = ct->dim();
    const std::string shape = fresh(name + "/shape"), batch = fresh(name + "/batch"),
                      target = fresh(name + "/target"), rows = fresh(name + "/rows");
    node("Shape", name + "/Shape", {in[0]}, shape);
    node("Slice", name + "/Slice",
         {shape, int_list(name + ".start", {0}), int_list(name + ".end", {1})}, batch);
    attr(node("Concat", name + "/Concat", {batch, int_list(name + ".rows_shape", {count, dim})},
              target),
         "axis", int64_t(0));
    node("Expand", name + "/Expand",
         {initializer(name + ".weight", {1, count, dim}, layer_params_), target}, rows);
    attr(node("Concat", name, {rows, in[0]}, out), "axis", int64_t(1));
    return;
  }
  if (const auto* rp = dynamic_cast<const RelativePositionBias*>(&l)) {
    // As torchvision writes it: the table's rows by the index, [w*w, w*w, heads], moved to
    // [heads, w*w, w*w] and added to the scores.
    const int64_t w = rp->window(), heads = rp->heads(), cells = w * w;
    std::vector<int64_t> index(size_t(cells * cells));
    for (int64_t i = 0; i < cells; ++i)
      for (int64_t j = 0; j < cells; ++j)
        index[size_t(i * cells + j)] = RelativePositionBias::table_row(w, i, j);
    const std::string rows = fresh(name + "/rows"), grid = fresh(name + "/grid"),
                      bias = fresh(name + "/bias");
    node("Gather", name + "/Gather",
         {initializer(name + ".table", {rp->table_rows(), heads}, layer_params_),
          int_list(name + ".index", index)},
         rows);
    node("Reshape", name + "/Reshape", {rows, int_list(name + ".shape", {cells, cells, heads})},
         grid);
    attr(node("Transpose", name + "/Transpose", {grid}, bias), "perm",
         std::vector<int64_t>{2, 0, 1});
    node("Add", name, {in[0], bias}, out);
    return;
  }
  if (const auto* pad = dynamic_cast<const Pad*>(&l)) {
    // ONNX's pads: every axis's zeros before, then every axis's after, the batch's none.
    std::vector<int64_t> pads = {0};
    pads.insert(pads.end(), pad->before().begin(), pad->before().end());
    pads.push_back(0);
    pads.insert(pads.end(), pad->after().begin(), pad->after().end());
    node("Pad", name, {in[0], int_list(name + ".pads", pads)}, out);  // mode: zeros
    return;
  }
  if (dynamic_cast<const FixedBias*>(&l)) {
    // The addend as a Constant node, [1, ...] over the batch: ONNX's fixed value, which the
    // importer reads back as this layer (an initializer may be a weight PyTorch trains).
    const Shape& shape = model_.output_shape(i);
    const std::string bias = fresh(name + "/bias");
    auto* a = node("Constant", name + "/Constant", {}, bias)->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(1);
    for (int64_t d : shape) t->add_dims(d);
    t->set_raw_data(layer_state_, size_t(numel(shape)) * sizeof(float));
    node("Add", name, {in[0], bias}, out);
    return;
  }
  if (dynamic_cast<const Mul*>(&l)) {
    // ONNX broadcasts a [batch, C, 1, 1] gate over [batch, C, H, W] as loom's mul does.
    node("Mul", name, in, out);
    return;
  }
  if (const auto* r = dynamic_cast<const Reshape*>(&l)) {
    // 0 keeps the batch axis as it is.
    std::vector<int64_t> shape = {0};
    shape.insert(shape.end(), r->shape().begin(), r->shape().end());
    node("Reshape", name, {in[0], int_list(name + ".shape", shape)}, out);
    return;
  }
  if (const auto* t = dynamic_cast<const Transpose*>(&l)) {
    std::vector<int64_t> perm = {0};
    for (int64_t a : t->perm()) perm.push_back(a + 1);
    attr(node("Transpose", name, in, out), "perm", perm);
    return;
  }
  if (const auto* sl = dynamic_cast<const Slice*>(&l)) {
    node("Slice", name,
         {in[0], int_list(name + ".starts", {sl->start()}), int_list(name + ".ends", {sl->end()}),
          int_list(name + ".axes", {sl->axis() + 1})},
         out);
    return;
  }
  if (const auto* cat = dynamic_cast<const Concat*>(&l)) {
    attr(node("Concat", name, in, out), "axis", cat->axis() + 1);
    return;
  }
  if (dynamic_cast<const ReLU*>(&l)) {
    node("Relu", name, in, out);
    return;
  }
  if (const auto* lr = dynamic_cast<const LeakyReLU*>(&l)) {
    attr(node("LeakyRelu", name, in, out), "alpha", lr->slope());
    return;
  }
  if (dynamic_cast<const Tanh*>(&l)) {
    node("Tanh", name, in, out);
    return;
  }
  if (dynamic_cast<const Sigmoid*>(&l)) {
    node("Sigmoid", name, in, out);
    return;
  }
  if (dynamic_cast<const ReLU6*>(&l)) {
    node("Clip", name, {in[0], scalar("const.zero", 0.0f), scalar("const.six", 6.0f)}, out);
    return;
  }
  if (dynamic_cast<const HardSigmoid*>(&l)) {
    onnx::NodeProto* n = node("HardSigmoid", name, in, out);
    attr(n, "alpha", float(1.0 / 6.0));
    attr(n, "beta", 0.5f);
    return;
  }
  if (dynamic_cast<const HardSwish*>(&l)) {
    // x * HardSigmoid(x): HardSwish is an op only from opset 14 on; the importer reads this
    // back as one hardswish layer.
    const std::string h = fresh(name + "/hardsigmoid");
    onnx::NodeProto* n = node("HardSigmoid", name + "/HardSigmoid", in, h);
    attr(n, "alpha", float(1.0 / 6.0));
    attr(n, "beta", 0.5f);
    node("Mul", name, {in[0], h}, out);
    return;
  }
  if (dynamic_cast<const SiLU*>(&l)) {
    const std::string sig = fresh(name + "/sigmoid");
    node("Sigmoid", name + "/Sigmoid", in, sig);
    node("Mul", name, {in[0], sig}, out);
    return;
  }
  if (dynamic_cast<const GELU*>(&l)) {
    // The exact (erf) GELU, x * 0.5 * (1 + erf(x / sqrt(2))), in the ops of opset 13 and in
    // torch.onnx's order, which loom's importer reads back as one gelu layer. (Gelu is an op
    // only from opset 20 on.)
    const std::string a = fresh(name + "/scaled"), b = fresh(name + "/erf"),
                      c = fresh(name + "/erf_plus_1"), d = fresh(name + "/x_times");
    node("Div", name + "/Div", {in[0], scalar("const.sqrt2", float(std::sqrt(2.0)))}, a);
    node("Erf", name + "/Erf", {a}, b);
    node("Add", name + "/Add", {b, scalar("const.one", 1.0f)}, c);
    node("Mul", name + "/Mul", {in[0], c}, d);
    node("Mul", name, {d, scalar("const.half", 0.5f)}, out);
    return;
  }
  if (const auto* dr = dynamic_cast<const Dropout*>(&l)) {
    // Kept in the graph with its ratio, so the importer gives back a dropout layer; without
    // training_mode it is the identity, as loom's is in evaluation.
    const float p = dr->p();
    node("Dropout", name, {in[0], initializer(name + ".ratio", {}, &p)}, out);
    return;
  }
  if (dynamic_cast<const Flatten*>(&l)) {
    attr(node("Flatten", name, in, out), "axis", int64_t(1));
    return;
  }
  fail(i,
       "ONNX export has no form for this layer type; it exports linear, conv2d, batchnorm1d/2d, "
       "maxpool2d, avgpool2d, globalavgpool2d, add, mul, concat, reshape, transpose, slice, "
       "matmul, softmax, scale, layernorm, position_embedding, class_token, "
       "relative_position_bias, fixed_bias, pad, relu, relu6, hardsigmoid, hardswish, leakyrelu, "
       "gelu, "
       "silu, tanh, sigmoid, dropout and flatten");
}

void Exporter::pool(int i, const Pool2dBase& p, bool max, const Names& in, const std::string& out) {
  const Pool2dOptions& o = p.options();
  const Shape& out_shape = model_.output_shape(i);
  const std::vector<int> ins = model_.layer_inputs(i);
  const Shape& x = ins[0] == kModelInput ? model_.input_shape() : model_.output_shape(ins[0]);
  // ONNX sizes a ceil_mode output as ceil((in + 2 pad - k) / s) + 1; loom (as PyTorch) drops a
  // last window that would start in the padding. Where the two differ no ONNX pool is the layer.
  if (o.ceil_mode) {
    auto onnx_size = [](int64_t in, int64_t k, int64_t s, int64_t pad) {
      return (in + 2 * pad - k + s - 1) / s + 1;
    };
    if (onnx_size(x[1], o.kernel_h, o.stride_h, o.pad_h) != out_shape[1] ||
        onnx_size(x[2], o.kernel_w, o.stride_w, o.pad_w) != out_shape[2])
      fail(i, fmt::format("with ceil_mode on input {} the last window would start in the "
                          "padding: loom drops it (as PyTorch does), ONNX's pool keeps it, so "
                          "no ONNX pool gives the layer's output {}",
                          shape_text(x), shape_text(out_shape)));
  }
  onnx::NodeProto* n = node(max ? "MaxPool" : "AveragePool", model_.layer_name(i), in, out);
  attr(n, "kernel_shape", std::vector<int64_t>{o.kernel_h, o.kernel_w});
  attr(n, "strides", std::vector<int64_t>{o.stride_h, o.stride_w});
  attr(n, "pads", std::vector<int64_t>{o.pad_h, o.pad_w, o.pad_h, o.pad_w});
  if (o.ceil_mode) attr(n, "ceil_mode", int64_t(1));
  // ONNX's default is 0, loom's (PyTorch's) 1: always written.
  if (!max) attr(n, "count_include_pad", int64_t(o.count_include_pad ? 1 : 0));
}

onnx::ModelProto Exporter::run() {
  onnx::ModelProto m;
  m.set_ir_version(kIrVersion);
  m.set_producer_name("loom");
  m.set_producer_version(LOOM_VERSION);
  if (!options_.doc.empty()) m.set_doc_string(options_.doc);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxExportOpset);
  graph_ = m.mutable_graph();
  graph_->set_name("loom");

  const int n = int(model_.layers().size());
  taken_ = {"input", "logits"};
  set_shape(graph_->add_input(), "input", options_.batch, model_.input_shape());
  // Each layer's output is a value named after the layer (the last one's is "logits").
  std::vector<std::string> value(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    value[size_t(i)] = i == n - 1 ? "logits" : fresh(model_.layer_name(i));
  int64_t param_at = 0, state_at = 0;
  for (int i = 0; i < n; ++i) {
    const Layer& l = *model_.layers()[size_t(i)];
    if (l.num_state() > 0 && !state_)
      fail(i, "the layer has state (running statistics) but the export was given none");
    layer_params_ = params_ + param_at;
    layer_state_ = state_ ? state_ + state_at : nullptr;
    Names in;
    for (int j : model_.layer_inputs(i))
      in.push_back(j == kModelInput ? "input" : value[size_t(j)]);
    layer(i, in, value[size_t(i)]);
    param_at += l.num_params();
    state_at += l.num_state();
  }
  set_shape(graph_->add_output(), "logits", options_.batch, model_.output_shape(n - 1));
  return m;
}

// ONNX's full check (Python's onnx.checker.check_model(m, full_check=True)): the checker, then
// shape inference that throws on any node it cannot type and on an inferred shape that
// disagrees with a declared one (the output's).
void full_check(const onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
    onnx::ModelProto inferred = m;
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw Error(fmt::format("ONNX's checker refuses the exported model: {}", e.what()));
  }
}

}  // namespace

namespace {

onnx::ModelProto checked_model(const Model& model, const float* params, const float* state,
                               const OnnxExportOptions& options) {
  if (options.batch < 0)
    throw ConfigError(fmt::format("ONNX export: batch {} is negative", options.batch));
  onnx::ModelProto m = Exporter(model, params, state, options).run();
  full_check(m);
  return m;
}

std::string serialized(const onnx::ModelProto& m, const Model& model) {
  std::string bytes;
  if (!m.SerializeToString(&bytes))
    throw ConfigError(fmt::format(
        "ONNX export: the model ({} parameters) does not fit a 2 GB protobuf", model.num_params()));
  return bytes;
}

}  // namespace

std::string onnx_model_bytes(const Model& model, const float* params, const float* state,
                             const OnnxExportOptions& options) {
  return serialized(checked_model(model, params, state, options), model);
}

void export_onnx(const Model& model, const float* params, const float* state,
                 const std::string& path, const OnnxExportOptions& options) {
  onnx::ModelProto m = checked_model(model, params, state, options);
  if (onnx_needs_external_data(model, options)) {
    // Every tensor of 1 KiB or more moves, end to end, into one file beside the model; its
    // location is relative to the model's folder, as ONNX's external data rule reads it.
    const std::string data_path = onnx_external_data_path(path);
    const std::string location = std::filesystem::path(data_path).filename().string();
    std::string data;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.raw_data().size() < 1024) continue;
      const size_t offset = data.size();
      data += t.raw_data();
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location},
                                       {"offset", std::to_string(offset)},
                                       {"length", std::to_string(data.size() - offset)}}) {
        auto* e = t.add_external_data();
        e->set_key(key);
        e->set_value(value);
      }
    }
    core::write_file_atomically(data_path, data);
  }
  core::write_file_atomically(path, serialized(m, model));
}

#endif  // LOOM_HAVE_ONNX

bool onnx_needs_external_data(const Model& model, const OnnxExportOptions& options) {
  return (model.num_params() + model.num_state()) * int64_t(sizeof(float)) > options.inline_bytes;
}

std::string onnx_external_data_path(const std::string& path) {
  return path + ".data";
}

}  // namespace loom::nn
