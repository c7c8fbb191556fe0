#include "loom/nn/io/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "loom/config.h"
#include "loom/core/error.h"

#if LOOM_HAVE_ONNX
#include "loom/nn/io/onnx_importer.h"
#endif

namespace loom::nn {

const std::vector<std::string>& onnx_ops() {
  static const std::vector<std::string> ops = {"Add",
                                               "And",
                                               "AveragePool",
                                               "BatchNormalization",
                                               "Cast",
                                               "Clip",
                                               "Concat",
                                               "Constant",
                                               "ConstantOfShape",
                                               "Conv",
                                               "Div",
                                               "Dropout",
                                               "Einsum",
                                               "Equal",
                                               "Erf",
                                               "Expand",
                                               "Flatten",
                                               "Gather",
                                               "Gemm",
                                               "GlobalAveragePool",
                                               "Greater",
                                               "GreaterOrEqual",
                                               "HardSigmoid",
                                               "HardSwish",
                                               "Identity",
                                               "LayerNormalization",
                                               "LeakyRelu",
                                               "Less",
                                               "LessOrEqual",
                                               "MatMul",
                                               "MaxPool",
                                               "Mod",
                                               "Mul",
                                               "Neg",
                                               "Not",
                                               "Or",
                                               "Pad",
                                               "Pow",
                                               "Range",
                                               "Reciprocal",
                                               "ReduceMean",
                                               "Relu",
                                               "Reshape",
                                               "ScatterND",
                                               "Shape",
                                               "Sigmoid",
                                               "Slice",
                                               "Softmax",
                                               "Split",
                                               "Sqrt",
                                               "Sub",
                                               "Sum",
                                               "Tanh",
                                               "Transpose",
                                               "Unsqueeze",
                                               "Where",
                                               "Xor"};
  return ops;
}

#if !LOOM_HAVE_ONNX

bool onnx_import_built() {
  return false;
}

GraphSpec graph_from_onnx_bytes(const void*, size_t, const std::string& name, const Shape&) {
  throw ConfigError(
      fmt::format("{}: this loom was built without ONNX import; install "
                  "libonnx-dev and libprotobuf-dev (scripts/setup) and rebuild",
                  name));
}

GraphSpec graph_from_onnx(const std::string& path, const Shape& input_shape) {
  return graph_from_onnx_bytes(nullptr, 0, path, input_shape);
}

#else

bool onnx_import_built() {
  return true;
}

namespace onnx_import {

const Value& Importer::input(const onnx::NodeProto& n, int k) const {
  if (!has_input(n, k))
    fail_node_input(n, fmt::format("input {} is missing (the op needs it)", k + 1));
  auto it = values_.find(n.input(k));
  if (it == values_.end())
    fail_node_input(n, fmt::format("input '{}' is neither a graph input, an initializer nor "
                                   "the output of an earlier node",
                                   n.input(k)));
  return it->second;
}

const Value& Importer::activation(const onnx::NodeProto& n, int k) const {
  const Value& v = input(n, k);
  if (v.kind == Value::kConstant)
    fail_node(n, fmt::format("input '{}' is a constant; loom reads this op only on the "
                             "activations that flow from the model's input",
                             n.input(k)));
  if (v.kind == Value::kPattern && v.stage == Value::kPadded)
    fail_node(n, fmt::format("input '{}' is zero-padded by node '{}'; loom reads Pad only "
                             "before a Conv or AveragePool",
                             n.input(k), v.node));
  if (v.kind == Value::kPattern && v.stage >= Value::kLnMean && v.stage <= Value::kLnStd)
    fail_node(n, fmt::format("input '{}' is part of the layer normalisation started at node "
                             "'{}', which loom reads only as a whole ((x - mean) / sqrt(var + "
                             "eps) over the last axis)",
                             n.input(k), v.node));
  if (v.kind == Value::kPattern && v.stage == Value::kExpanded)
    fail_node(n, fmt::format("input '{}' is a constant expanded to the batch by node '{}', "
                             "which loom reads only as learned rows put before an activation "
                             "by a Concat (ViT's class token)",
                             n.input(k), v.node));
  if (v.kind == Value::kPattern && v.stage == Value::kCausalMasked)
    fail_node(n, fmt::format("input '{}' is attention scores under the causal mask of node "
                             "'{}', which loom reads only as the input of a Softmax",
                             n.input(k), v.node));
  if (v.kind == Value::kPattern)
    fail_node(n, fmt::format("input '{}' is part of the computation started at node '{}', "
                             "which loom reads only as a whole GELU "
                             "(x * 0.5 * (1 + erf(x / sqrt(2))))",
                             n.input(k), v.node));
  return v;
}

const Value& Importer::constant(const onnx::NodeProto& n, int k) const {
  const Value& v = input(n, k);
  if (v.kind != Value::kConstant)
    fail_node(n, fmt::format("input '{}' is computed from the model's input; loom needs a "
                             "constant (an initializer) there",
                             n.input(k)));
  if (!v.unusable.empty()) fail_node(n, fmt::format("input '{}': {}", n.input(k), v.unusable));
  return v;
}

int64_t Importer::attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def) const {
  const auto* a = Attrs{n}.find(name);
  if (!a) return def;
  if (a->type() != onnx::AttributeProto::INT)
    fail_node_input(n, fmt::format("attribute '{}' is not an integer", name));
  return a->i();
}

double Importer::attr_float(const onnx::NodeProto& n, const std::string& name, double def) const {
  const auto* a = Attrs{n}.find(name);
  if (!a) return def;
  if (a->type() != onnx::AttributeProto::FLOAT)
    fail_node_input(n, fmt::format("attribute '{}' is not a float", name));
  return a->f();
}

std::vector<int64_t> Importer::attr_ints(const onnx::NodeProto& n, const std::string& name,
                                         std::vector<int64_t> def) const {
  const auto* a = Attrs{n}.find(name);
  if (!a) return def;
  if (a->type() != onnx::AttributeProto::INTS)
    fail_node_input(n, fmt::format("attribute '{}' is not a list of integers", name));
  return {a->ints().begin(), a->ints().end()};
}

std::string Importer::attr_string(const onnx::NodeProto& n, const std::string& name) const {
  const auto* a = Attrs{n}.find(name);
  if (!a) return "";
  if (a->type() != onnx::AttributeProto::STRING)
    fail_node_input(n, fmt::format("attribute '{}' is not a string", name));
  return a->s();
}

// An attribute loom does not interpret changes what the op computes: refuse it rather than
// import a different network.
void Importer::only_attrs(const onnx::NodeProto& n,
                          std::initializer_list<const char*> known) const {
  for (const auto& a : n.attribute()) {
    bool ok = false;
    for (const char* k : known) ok = ok || a.name() == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail_node(n, fmt::format("attribute '{}' is not one loom reads for this op ({})", a.name(),
                               list.empty() ? "none" : list));
    }
  }
}

// Outputs loom does not compute (BatchNorm's saved statistics, Dropout's mask) must be unused.
void Importer::unused_outputs_from(const onnx::NodeProto& n, int first) const {
  for (int k = first; k < n.output_size(); ++k) {
    if (n.output(k).empty()) continue;
    auto it = uses_.find(n.output(k));
    if (it != uses_.end() && it->second > 0)
      fail_node(n, fmt::format("output {} ('{}') is read by the graph; loom computes only the "
                               "first output of this op",
                               k + 1, n.output(k)));
  }
}

void Importer::define(const std::string& name, Value v) {
  if (name.empty()) return;
  if (!values_.emplace(name, std::move(v)).second)
    fail_input(fmt::format("value '{}' is defined twice (ONNX values have one producer)", name));
}

LayerSpec& Importer::emit(const onnx::NodeProto& n, const std::string& type,
                          const std::vector<const Value*>& inputs, Shape out_shape,
                          const std::string& as, int output) {
  std::string base = sanitize(n.name());
  if (base.empty()) base = sanitize(n.output(0));
  const size_t at = base.rfind(n.op_type());
  if (!as.empty() && at != std::string::npos) {
    const size_t end = at + n.op_type().size();
    const bool tail_is_count =
        end == base.size() || (base[end] == '_' && end + 1 < base.size() &&
                               std::all_of(base.begin() + long(end) + 1, base.end(), [](char c) {
                                 return std::isdigit(static_cast<unsigned char>(c));
                               }));
    if (tail_is_count) base = base.substr(0, at) + as + base.substr(end);
  }
  if (base.empty() || base == "input") base = type;
  std::string name = base;
  for (int k = 2; names_.count(name) || name == "input"; ++k) name = fmt::format("{}_{}", base, k);
  names_.insert(name);
  LayerSpec l;
  l.type = type;
  l.name = name;
  l.where = where_;
  for (const Value* v : inputs) l.inputs.push_back(v->layer);
  layer_index_[name] = graph_.layers.size();
  graph_.layers.push_back(std::move(l));
  if (output != kInner) define(n.output(output), inner_value(std::move(out_shape)));
  return graph_.layers.back();
}

Value Importer::tensor_value(const onnx::TensorProto& t, const std::string& what) const {
  Value v;
  v.kind = Value::kConstant;
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && numel > kMaxElements / d))
      fail_input(fmt::format("{}: shape {} is not a valid tensor shape", what,
                             dims_text({t.dims().begin(), t.dims().end()})));
    numel *= d;
    v.dims.push_back(d);
  }
  // Models over protobuf's 2 GB keep their weights in files beside the .onnx file.
  const bool external = t.data_location() == onnx::TensorProto::EXTERNAL;
  const std::string external_bytes = external ? external_data(t, what) : std::string();
  const std::string& raw = external ? external_bytes : t.raw_data();
  const bool has_raw = external || t.has_raw_data();
  auto check = [&](int64_t have) {
    if (have != numel)
      fail_input(fmt::format("{}: shape {} needs {} values, the file holds {}", what,
                             dims_text(v.dims), numel, have));
  };
  auto from_raw = [&](size_t width, auto convert) {
    if (raw.size() != size_t(numel) * width)
      fail_input(fmt::format("{}: shape {} needs {} bytes of data, the file holds {}", what,
                             dims_text(v.dims), size_t(numel) * width, raw.size()));
    for (int64_t i = 0; i < numel; ++i) convert(raw.data() + size_t(i) * width);
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE: {
      const bool dbl = t.data_type() == onnx::TensorProto::DOUBLE;
      v.floats.reserve(size_t(numel));
      if (has_raw) {
        from_raw(dbl ? 8 : 4, [&](const char* p) {
          if (dbl) {
            double x;
            std::memcpy(&x, p, 8);
            v.floats.push_back(float(x));
          } else {
            float x;
            std::memcpy(&x, p, 4);
            v.floats.push_back(x);
          }
        });
      } else if (dbl) {
        check(t.double_data_size());
        for (double x : t.double_data()) v.floats.push_back(float(x));
      } else {
        check(t.float_data_size());
        v.floats.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    }
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::BOOL: {
      v.is_int = true;
      const size_t width = t.data_type() == onnx::TensorProto::INT64   ? 8
                           : t.data_type() == onnx::TensorProto::INT32 ? 4
                                                                       : 1;
      v.ints.reserve(size_t(numel));
      if (has_raw) {
        from_raw(width, [&](const char* p) {
          int64_t x = 0;
          if (width == 8) {
            std::memcpy(&x, p, 8);
          } else if (width == 4) {
            int32_t y;
            std::memcpy(&y, p, 4);
            x = y;
          } else {
            x = *p != 0;
          }
          v.ints.push_back(x);
        });
      } else if (width == 8) {
        check(t.int64_data_size());
        v.ints.assign(t.int64_data().begin(), t.int64_data().end());
      } else {
        check(t.int32_data_size());
        v.ints.assign(t.int32_data().begin(), t.int32_data().end());
      }
      // Integers stand for sizes; kBatch is reserved for the batch axis.
      for (int64_t& x : v.ints) x = std::max(x, kBatchEnd);
      break;
    }
    default:
      v.unusable = fmt::format(
          "element type {} is not one loom reads (float, double, int32, "
          "int64, bool)",
          t.data_type());
  }
  return v;
}

std::string Importer::external_data(const onnx::TensorProto& t, const std::string& what) const {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    auto number = [&](const char* key) {
      const std::string& v = e.value();
      if (v.empty() || v.size() > 18 ||
          !std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(uint8_t(c)); }))
        fail_input(fmt::format("{}: external data {} '{}' is not a byte count", what, key, v));
      return int64_t(std::stoll(v));
    };
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset") offset = number("offset");
    if (e.key() == "length") length = number("length");
  }
  // The location is a path relative to the model's folder (ONNX's rule); one that leaves it is
  // refused rather than read.
  const std::filesystem::path rel(location);
  bool inside = !location.empty() && rel.is_relative();
  for (const auto& part : rel) inside = inside && part != "..";
  if (!inside)
    fail_input(fmt::format("{}: external data location '{}' is not a file in the model's folder",
                           what, location));
  const std::filesystem::path path = std::filesystem::path(file_).parent_path() / rel;
  std::ifstream f(path, std::ios::binary);
  if (!f) fail_input(fmt::format("{}: cannot open its external data file {}", what, path.string()));
  f.seekg(0, std::ios::end);
  const int64_t size = int64_t(f.tellg());
  if (length < 0) length = size - offset;
  if (offset > size || length < 0 || length > size - offset)
    fail_input(fmt::format("{}: external data [{}, {}) is outside {} ({} bytes)", what, offset,
                           offset + length, path.string(), size));
  if (length > int64_t(8) * kMaxElements)
    fail_input(fmt::format("{}: {} bytes of external data is more than a tensor loom trains", what,
                           length));
  std::string bytes(size_t(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  if (!f) fail_input(fmt::format("{}: cannot read its external data from {}", what, path.string()));
  return bytes;
}

void Importer::check_versions(const onnx::ModelProto& model) {
  if (model.ir_version() < kMinIr || model.ir_version() > kMaxIr)
    fail_config(fmt::format("ONNX IR version {}; loom reads IR versions {} to {}",
                            model.ir_version(), kMinIr, kMaxIr));
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
    else
      fail_config(
          fmt::format("the model uses operator set domain '{}'; loom reads the default "
                      "domain (ai.onnx) only",
                      o.domain()));
  }
  if (opset < 0) fail_config("the model imports no opset of the default domain (ai.onnx)");
  if (opset < kMinOpset || opset > kMaxOpset)
    fail_config(
        fmt::format("opset {} of the default domain; loom reads opsets {} to {} "
                    "(torch.onnx.export(..., opset_version=14))",
                    opset, kMinOpset, kMaxOpset));
}

void Importer::read_input(const onnx::GraphProto& g) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : g.input())
    if (!inits.count(in.name())) inputs.push_back(&in);
  if (inputs.size() != 1) {
    std::string names;
    for (const auto* in : inputs) names += (names.empty() ? "'" : "', '") + in->name();
    fail_config(fmt::format("the graph has {} inputs{}{}; a loom model has one", inputs.size(),
                            names.empty() ? "" : " (", names.empty() ? "" : names + "')"));
  }
  const onnx::ValueInfoProto& in = *inputs[0];
  if (in.name().empty()) fail_input("the graph's input has no name");
  const auto& type = in.type();
  if (!type.has_tensor_type())
    fail_config(fmt::format("the graph's input '{}' is not a tensor", in.name()));
  const int elem = type.tensor_type().elem_type();
  if (elem != onnx::TensorProto::FLOAT)
    fail_config(fmt::format("the graph's input '{}' has element type {}; loom feeds float32",
                            in.name(), elem));
  if (type.tensor_type().has_shape()) {
    const auto& dims = type.tensor_type().shape().dim();
    std::vector<int64_t> file_dims;
    bool match = dims.size() == int(input_shape_.size()) + 1;
    for (int i = 0; i < dims.size(); ++i) {
      const bool known = dims[i].has_dim_value();
      file_dims.push_back(i == 0 || !known ? kBatch : dims[i].dim_value());
      if (i == 0 && known) static_batch_ = dims[i].dim_value();
      if (match && i > 0 && known && dims[i].dim_value() != input_shape_[size_t(i - 1)])
        match = false;
    }
    if (!match)
      fail_config(
          fmt::format("the model's input '{}' is {} but the data's samples are {} "
                      "(a batch of them is {})",
                      in.name(), dims_text(file_dims), dims_text(input_shape_),
                      batch_shape_text(input_shape_)));
  }
  Value v;
  v.layer = "input";
  v.shape = input_shape_;
  define(in.name(), v);
}

GraphSpec Importer::run(const onnx::ModelProto& model) {
  graph_.source = file_;
  check_versions(model);
  if (!model.has_graph()) fail_input("the file holds no graph");
  const onnx::GraphProto& g = model.graph();
  read_input(g);
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) fail_input("an initializer has no name");
    if (values_.count(t.name()) && values_[t.name()].kind == Value::kConstant)
      fail_input(fmt::format("initializer '{}' is given twice", t.name()));
    values_[t.name()] = tensor_value(t, fmt::format("initializer '{}'", t.name()));
    initializers_.insert(t.name());
    weights_.insert(t.name());
    // Weights that are NaN or Inf would train (and be saved) into a model that answers NaN:
    // refused here, naming the file and the initializer. (Constants computed by nodes may
    // hold an Inf on purpose, a Clip bound; initializers are weights.)
    const std::vector<float>& f = values_[t.name()].floats;
    for (size_t i = 0; i < f.size(); ++i)
      if (!std::isfinite(f[i]))
        fail_input(fmt::format("initializer '{}' holds {} at element {}", t.name(),
                               std::isnan(f[i]) ? "NaN" : "Inf", i));
  }
  if (g.output_size() != 1)
    fail_config(fmt::format("the graph has {} outputs; a loom model has one", g.output_size()));
  for (const auto& n : g.node())
    for (const auto& in : n.input()) {
      ++uses_[in];
      readers_[in].push_back(n.op_type());
    }
  ++uses_[g.output(0).name()];

  for (const auto& n : g.node()) {
    if (n.output_size() == 0 || n.output(0).empty())
      fail_input(fmt::format("{} has no output", node_text(n)));
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail_config(fmt::format("{} is in domain '{}'; loom reads ops of the default domain only",
                              node_text(n), n.domain()));
    where_ = fmt::format("{}: {}", file_, node_text(n));
    read_node(n);
    // A weight's entries moved or cut by a fold (a slice of a position table) are a weight's.
    static const std::set<std::string> moves = {"Slice",   "Unsqueeze", "Squeeze",  "Reshape",
                                                "Flatten", "Transpose", "Identity", "Gather"};
    const auto out = values_.find(n.output(0));
    if (moves.count(n.op_type()) && n.input_size() > 0 && weights_.count(n.input(0)) &&
        out != values_.end() && out->second.kind == Value::kConstant)
      weights_.insert(n.output(0));
  }

  const std::string& out = g.output(0).name();
  auto it = values_.find(out);
  if (it == values_.end())
    fail_input(fmt::format("the graph's output '{}' is computed by no node", out));
  if (it->second.kind != Value::kActivation || it->second.layer == "input")
    fail_config(
        fmt::format("the graph's output '{}' is not computed by any layer from the "
                    "input",
                    out));
  // An output whose batch axis an earlier Transpose moved: stored with the batch first again.
  if (!it->second.view.empty()) it->second = materialized(g.node(g.node_size() - 1), it->second);

  // Keep the layers the output depends on: ops whose results nothing reads (a Sigmoid that
  // became part of a SiLU) must not become extra outputs of the model.
  std::set<std::string> keep;
  std::vector<std::string> todo = {it->second.layer};
  while (!todo.empty()) {
    std::string name = todo.back();
    todo.pop_back();
    if (name == "input" || !keep.insert(name).second) continue;
    for (const auto& in : graph_.layers[layer_index_.at(name)].inputs) todo.push_back(in);
  }
  std::vector<LayerSpec> kept;
  for (auto& l : graph_.layers)
    if (keep.count(l.name)) kept.push_back(std::move(l));
  graph_.layers = std::move(kept);
  return std::move(graph_);
}

void Importer::read_node(const onnx::NodeProto& n) {
  if (read_view_node(n)) return;
  const std::string& op = n.op_type();
  if (op == "Conv") return conv(n);
  if (op == "MaxPool") return pool(n, true);
  if (op == "AveragePool") return pool(n, false);
  if (op == "Gemm") return gemm(n);
  if (op == "MatMul") return matmul(n);
  if (folds_elementwise(n)) return fold_elementwise(n);
  if (op == "Range") return fold_range(n);
  if (op == "ScatterND") return fold_scatter_nd(n);
  if (layernorm_step(n)) return;
  if (op == "Softmax") return softmax(n);
  if (op == "Where") return where(n);
  if (op == "LayerNormalization") return layer_normalization(n);
  if (op == "Add") return add(n);
  if (op == "Mul") return mul(n);
  if (op == "Transpose") return transpose(n);
  if (op == "Slice") return slice(n);
  if (op == "Split") return split(n);
  if (op == "ReduceMean") return reduce_mean(n);
  if (op == "BatchNormalization") return batchnorm(n);
  if (op == "Dropout") return dropout(n);
  if (op == "Flatten") return flatten(n);
  if (op == "Reshape") return input(n, 0).kind == Value::kConstant ? fold_reshape(n) : reshape(n);
  if (op == "ConstantOfShape") return fold_constant_of_shape(n);
  if (op == "Expand") return expand(n);
  if (op == "Concat") return concat(n);
  if (op == "Sum") return sum(n);
  if (op == "Pad") return pad(n);
  if (op == "Shape") return fold_shape(n);
  if (op == "Gather") return input(n, 0).kind == Value::kConstant ? fold_gather(n) : gather(n);
  if (op == "Unsqueeze") return fold_unsqueeze(n);
  if (op == "Cast") return fold_cast(n);
  if (op == "Constant") return constant_node(n);
  if (op == "Identity") {
    only_attrs(n, {});
    return alias(n, input(n, 0));
  }
  if (op == "GlobalAveragePool") {
    only_attrs(n, {});
    const Value& x = activation(n, 0);
    if (x.shape.size() != 3)
      fail_node(n, fmt::format("input is {}, not [batch, C, H, W]", batch_shape_text(x.shape)));
    // [C, 1, 1], as ONNX computes it; a Flatten after it makes the pool's own [C] again
    // (squeeze_kept_pool).
    emit(n, "globalavgpool2d", {&x}, {x.shape[0], 1, 1}).params["keep_dims"] = cv(true);
    return;
  }
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "LeakyRelu") {
    only_attrs(n, op == "LeakyRelu" ? std::initializer_list<const char*>{"alpha"}
                                    : std::initializer_list<const char*>{});
    const Value& x = activation(n, 0);
    const std::string type = op == "Relu"      ? "relu"
                             : op == "Sigmoid" ? "sigmoid"
                             : op == "Tanh"    ? "tanh"
                                               : "leakyrelu";
    const std::string of = x.layer;
    LayerSpec& l = emit(n, type, {&x}, x.shape);
    if (op == "LeakyRelu") l.params["slope"] = cv_float(attr_float(n, "alpha", 0.01));
    if (op == "Sigmoid") values_[n.output(0)].sigmoid_of = of;
    return;
  }
  if (op == "Clip") {
    // ReLU6, as torch.onnx writes it: min and max as constant inputs (opset 11 on) or as
    // attributes (before).
    only_attrs(n, {"min", "max"});
    const Value& x = activation(n, 0);
    const bool as_inputs = has_input(n, 1) || has_input(n, 2);
    const bool relu6 =
        as_inputs ? has_input(n, 1) && has_input(n, 2) && is_scalar(input(n, 1), 0.0, 0.0) &&
                        is_scalar(input(n, 2), 6.0, 0.0)
                  : attr_float(n, "min", -1) == 0.0 && attr_float(n, "max", -1) == 6.0;
    if (!relu6) fail_node(n, "loom reads Clip only as ReLU6: min 0 and max 6, as constants");
    emit(n, "relu6", {&x}, x.shape);
    return;
  }
  if (op == "HardSigmoid") {
    only_attrs(n, {"alpha", "beta"});
    const Value& x = activation(n, 0);
    const double alpha = attr_float(n, "alpha", 0.2), beta = attr_float(n, "beta", 0.5);
    if (std::fabs(alpha - 1.0 / 6.0) > 1e-6 || beta != 0.5)
      fail_node(n, fmt::format("alpha {} and beta {}: loom's hardsigmoid is PyTorch's, alpha 1/6 "
                               "and beta 0.5",
                               alpha, beta));
    const std::string of = x.layer;
    emit(n, "hardsigmoid", {&x}, x.shape);
    values_[n.output(0)].hardsigmoid_of = of;
    return;
  }
  if (op == "HardSwish") {
    only_attrs(n, {});
    const Value& x = activation(n, 0);
    emit(n, "hardswish", {&x}, x.shape);
    return;
  }
  if (op == "Sub")
    fail_node(n,
              "loom reads Sub only between constants (the arithmetic of a shape) and as "
              "layer normalisation's x - mean");
  if (op == "Pow" || op == "Sqrt" || op == "Reciprocal" || op == "Equal")
    fail_node(n, fmt::format("loom reads {} only on constants and as a step of layer "
                             "normalisation",
                             op));
  if (op == "Div") {
    // x / sqrt(2), the first step of GELU; else a division by a constant.
    const Value& x = activation(n, 0);
    const Value& c = input(n, 1);
    if (!is_scalar(c, std::sqrt(2.0), 1e-4) || !read_only_by(n.output(0), "Erf")) {
      if (scale_by_constant(n, x, c, true)) return;
      fail_node(n,
                "loom reads Div only by a constant (a scale layer), as layer normalisation's "
                "last step, and as the x / sqrt(2) of GELU's erf form");
    }
    Value p;
    p.kind = Value::kPattern;
    p.stage = 1;
    p.layer = x.layer;
    p.shape = x.shape;
    p.node = n.name();
    return alias(n, p);
  }
  if (op == "Erf") {
    const Value& p = input(n, 0);
    if (p.kind != Value::kPattern || p.stage != 1)
      fail_node(n, "loom reads Erf only as the erf(x / sqrt(2)) of GELU's erf form");
    Value q = p;
    q.stage = 2;
    return alias(n, q);
  }
  std::string ops;
  for (const auto& o : onnx_ops()) ops += (ops.empty() ? "" : ", ") + o;
  fail_node(n,
            fmt::format("loom has no layer for ONNX op {}; it reads {} (docs/models.md)", op, ops));
}

}  // namespace onnx_import

GraphSpec graph_from_onnx_bytes(const void* data, size_t size, const std::string& name,
                                const Shape& input_shape) {
  onnx::ModelProto model;
  if (size == 0) throw InputError(fmt::format("{}: the file is empty", name));
  if (size > size_t(std::numeric_limits<int>::max()))
    throw InputError(fmt::format("{}: {} bytes is more than an ONNX file can hold", name, size));
  if (!model.ParseFromArray(data, int(size)))
    throw InputError(
        fmt::format("{}: not an ONNX model (the protobuf does not parse: the file "
                    "is truncated or of another format)",
                    name));
  return onnx_import::Importer(name, input_shape).run(model);
}

GraphSpec graph_from_onnx(const std::string& path, const Shape& input_shape) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open the ONNX file", path));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw InputError(fmt::format("{}: cannot read the ONNX file", path));
  return graph_from_onnx_bytes(bytes.data(), bytes.size(), path, input_shape);
}

#endif  // LOOM_HAVE_ONNX

}  // namespace loom::nn
