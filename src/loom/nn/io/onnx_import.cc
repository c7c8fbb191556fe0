#include "loom/nn/io/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "loom/config.h"
#include "loom/core/error.h"

#if LOOM_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace loom::nn {

const std::vector<std::string>& onnx_ops() {
  static const std::vector<std::string> ops = {"Add",         "AveragePool", "BatchNormalization",
                                               "Cast",        "Clip",        "Concat",
                                               "Constant",    "Conv",        "Div",
                                               "Dropout",     "Erf",         "Flatten",
                                               "Gather",      "Gemm",        "GlobalAveragePool",
                                               "HardSigmoid", "HardSwish",   "Identity",
                                               "LeakyRelu",   "MatMul",      "MaxPool",
                                               "Mul",         "Pad",         "Relu",
                                               "Reshape",     "Shape",       "Sigmoid",
                                               "Sum",         "Tanh",        "Unsqueeze"};
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

namespace {

// Torch 1.13 writes IR 7 (opsets 13, 14) or 8; the ops below are read as opsets 11 to 17
// define them (Unsqueeze's axes and Dropout's ratio moved from attributes to inputs there).
constexpr int64_t kMinIr = 3, kMaxIr = 8;
constexpr int64_t kMinOpset = 11, kMaxOpset = 17;
// The batch axis inside a folded shape (Shape of an activation): its size is unknown.
constexpr int64_t kBatch = std::numeric_limits<int64_t>::min();
// No tensor of a model loom trains has more elements; larger claims are a broken file.
constexpr int64_t kMaxElements = int64_t(1) << 31;

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + (d[i] == kBatch ? std::string("batch") : std::to_string(d[i]));
  return s + "]";
}

std::string batch_shape_text(const Shape& s) {
  std::vector<int64_t> d = {kBatch};
  d.insert(d.end(), s.begin(), s.end());
  return dims_text(d);
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A layer name from an ONNX name: "/layer1/conv1/Conv" -> "layer1_conv1_Conv".
std::string sanitize(const std::string& name) {
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
  // kPattern: a step of the erf form of GELU, x * 0.5 * (1 + erf(x / sqrt(2))), which loom
  // reads only as a whole: stage 1 = x / sqrt(2), 2 = erf of it, 3 = 1 + that, 4 = x * that.
  // Or kPadded: x zero-padded by pad_h, pad_w at both ends, which loom reads only as the padding
  // of the Conv or AveragePool that follows (PyTorch writes avg_pool2d as Pad + AveragePool).
  static constexpr int kPadded = 10;
  int stage = 0;
  int64_t pad_h = 0, pad_w = 0;
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
  LayerSpec& emit(const onnx::NodeProto& n, const std::string& type,
                  const std::vector<const Value*>& inputs, Shape out_shape,
                  const std::string& as = "");
  // A float attribute as the decimal a person wrote (0.1, not 0.10000000149011612).
  ConfigValue cv_float(double x) const { return cv(std::stod(fmt::format("{:.7g}", x))); }
  ConfigValue cv(ConfigScalar x) const {
    ConfigValue c;
    c.value = std::move(x);
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
  void add(const onnx::NodeProto& n);
  void mul(const onnx::NodeProto& n);
  void batchnorm(const onnx::NodeProto& n);
  void dropout(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void reshape(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  void sum(const onnx::NodeProto& n);
  void pad(const onnx::NodeProto& n);
  // Input 0 of a Conv or pooling node, with the padding of a Pad before it (0 if none).
  const Value& padded_activation(const onnx::NodeProto& n, int64_t& pad_h, int64_t& pad_w) const;
  void fold_shape(const onnx::NodeProto& n);
  void fold_gather(const onnx::NodeProto& n);
  void fold_unsqueeze(const onnx::NodeProto& n);
  void fold_cast(const onnx::NodeProto& n);
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
  std::map<std::string, int> uses_;  // readers of each value name (the graph output counts)
  GraphSpec graph_;
  std::map<std::string, size_t> layer_index_;  // layer name -> index in graph_.layers
  std::set<std::string> names_;
  std::map<std::string, size_t> matmul_layers_;  // MatMul output -> its bias-less linear layer
};

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
                          const std::string& as) {
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
  Value out;
  out.layer = name;
  out.shape = std::move(out_shape);
  define(n.output(0), out);
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
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail_config(
        fmt::format("{}: its data is in an external file; loom reads models whose "
                    "weights are inside the .onnx file",
                    what));
  const std::string& raw = t.raw_data();
  const bool has_raw = t.has_raw_data();
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
      for (int64_t& x : v.ints) x = std::max(x, kBatch + 1);
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
    for (const auto& in : n.input()) ++uses_[in];
  ++uses_[g.output(0).name()];

  for (const auto& n : g.node()) {
    if (n.output_size() == 0 || n.output(0).empty())
      fail_input(fmt::format("{} has no output", node_text(n)));
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail_config(fmt::format("{} is in domain '{}'; loom reads ops of the default domain only",
                              node_text(n), n.domain()));
    where_ = fmt::format("{}: {}", file_, node_text(n));
    read_node(n);
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
  const std::string& op = n.op_type();
  if (op == "Conv") return conv(n);
  if (op == "MaxPool") return pool(n, true);
  if (op == "AveragePool") return pool(n, false);
  if (op == "Gemm") return gemm(n);
  if (op == "MatMul") return matmul(n);
  if (op == "Add") return add(n);
  if (op == "Mul") return mul(n);
  if (op == "BatchNormalization") return batchnorm(n);
  if (op == "Dropout") return dropout(n);
  if (op == "Flatten") return flatten(n);
  if (op == "Reshape") return reshape(n);
  if (op == "Concat") return concat(n);
  if (op == "Sum") return sum(n);
  if (op == "Pad") return pad(n);
  if (op == "Shape") return fold_shape(n);
  if (op == "Gather") return fold_gather(n);
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
    emit(n, "globalavgpool2d", {&x}, {x.shape[0], 1, 1});
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
  if (op == "Div") {
    // x / sqrt(2), the first step of GELU.
    const Value& x = activation(n, 0);
    const Value& c = input(n, 1);
    if (!is_scalar(c, std::sqrt(2.0), 1e-4))
      fail_node(n, "loom reads Div only as the x / sqrt(2) of GELU's erf form");
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
  if (x.shape.size() != 1)
    fail_node(n, fmt::format("input is {}, not [batch, features]", batch_shape_text(x.shape)));
  if (b.dims.size() != 2 || b.is_int)
    fail_node(n, fmt::format("weights '{}' are {}, not a matrix", n.input(1), dims_text(b.dims)));
  const int64_t in = trans_b ? b.dims[1] : b.dims[0];
  const int64_t out = trans_b ? b.dims[0] : b.dims[1];
  if (in != x.shape[0])
    fail_node(n, fmt::format("weights {}{} do not take {} features", dims_text(b.dims),
                             trans_b ? " (transposed)" : "", x.shape[0]));
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
  LayerSpec& l = emit(n, "linear", {&x}, {out});
  l.params["out"] = cv(out);
  if (!bias) l.params["bias"] = cv(false);
  l.init_params = std::move(params);
}

void Importer::matmul(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& x = activation(n, 0);
  const Value& b = constant(n, 1);
  if (x.shape.size() != 1)
    fail_node(n, fmt::format("input is {}; loom reads MatMul only as a linear layer on "
                             "[batch, features]",
                             batch_shape_text(x.shape)));
  if (b.dims.size() != 2 || b.is_int || b.dims[0] != x.shape[0])
    fail_node(n, fmt::format("weights '{}' are {}, not [{}, out]", n.input(1), dims_text(b.dims),
                             x.shape[0]));
  const int64_t in = b.dims[0], out = b.dims[1];
  std::vector<float> params(b.floats.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) params[size_t(o * in + i)] = b.floats[size_t(i * out + o)];
  LayerSpec& l = emit(n, "linear", {&x}, {out});
  l.params["out"] = cv(out);
  l.params["bias"] = cv(false);
  l.init_params = std::move(params);
  matmul_layers_[n.output(0)] = graph_.layers.size() - 1;
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
    const int64_t out = v.shape[0];
    if (uses_[n.input(k)] != 1 || c.is_int || !c.unusable.empty() ||
        (c.dims != std::vector<int64_t>{out} && c.dims != std::vector<int64_t>{1, out}))
      continue;
    LayerSpec& l = graph_.layers[mm->second];
    l.params.erase("bias");
    l.init_params.insert(l.init_params.end(), c.floats.begin(), c.floats.end());
    matmul_layers_.erase(mm);
    return alias(n, v);
  }
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
      "loom has no elementwise Mul layer; it reads Mul only in x * sigmoid(x) (SiLU), in "
      "x * hardsigmoid(x) (Hardswish) and in GELU's erf form x * 0.5 * (1 + erf(x / sqrt(2)))";
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
    if (p.kind == Value::kActivation && is_scalar(q, std::sqrt(0.5), 1e-4)) {
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
  fail_node(n, what);
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

void Importer::flatten(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& x = activation(n, 0);
  int64_t axis = attr_int(n, "axis", 1);
  if (axis < 0) axis += int64_t(x.shape.size()) + 1;
  if (axis != 1)
    fail_node(n, fmt::format("axis {} is not read; loom flattens each sample (axis = 1)",
                             attr_int(n, "axis", 1)));
  if (x.shape.size() == 1) return alias(n, x);
  emit(n, "flatten", {&x}, {elements(x.shape)});
}

void Importer::reshape(const onnx::NodeProto& n) {
  only_attrs(n, {"allowzero"});
  const Value& x = activation(n, 0);
  const Value& s = constant(n, 1);
  if (!s.is_int || s.dims.size() != 1)
    fail_node(n, fmt::format("shape '{}' is not a list of integers", n.input(1)));
  std::vector<int64_t> t = s.ints;
  if (!t.empty() && static_batch_ > 0 && t[0] == static_batch_) t[0] = kBatch;
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  const std::string target = dims_text(t);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == 0 && !allowzero) {
      if (i > x.shape.size()) fail_node(n, fmt::format("shape {} copies a missing axis", target));
      t[i] = i == 0 ? kBatch : x.shape[i - 1];
    }
  const int64_t numel = elements(x.shape);
  Shape per_sample;
  bool ok = !t.empty() && (t[0] == kBatch || t[0] == -1);
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 1; ok && i < t.size(); ++i) {
    if (t[i] == -1 && t[0] != -1 && unknown < 0) {
      unknown = int(i);
    } else if (t[i] < 1 || __builtin_mul_overflow(known, t[i], &known) || known > numel) {
      ok = false;
    }
    per_sample.push_back(t[i]);
  }
  if (ok && unknown >= 0) {
    ok = known > 0 && numel % known == 0;
    if (ok) per_sample[size_t(unknown - 1)] = numel / known;
  } else if (ok) {
    ok = known == numel;
  }
  if (!ok)
    fail_node(n, fmt::format("reshape of {} to {}: loom reads Reshape only when it keeps the "
                             "batch axis first and the sample's size (as flatten does)",
                             batch_shape_text(x.shape), target));
  if (per_sample == x.shape) return alias(n, x);
  if (per_sample.size() != 1)
    fail_node(n, fmt::format("reshape of {} to {}: loom reshapes only to [batch, -1] "
                             "(flatten)",
                             batch_shape_text(x.shape), batch_shape_text(per_sample)));
  emit(n, "flatten", {&x}, per_sample);
}

void Importer::concat(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  if (n.input_size() < 1) fail_node_input(n, "it has no inputs");
  const int64_t axis_attr = attr_int(n, "axis", 0);
  if (input(n, 0).kind == Value::kConstant) {
    // Folding a shape: 1-D integer lists joined end to end.
    Value out;
    out.kind = Value::kConstant;
    out.is_int = true;
    for (int k = 0; k < n.input_size(); ++k) {
      const Value& v = constant(n, k);
      if (!v.is_int || v.dims.size() != 1 || (axis_attr != 0 && axis_attr != -1))
        fail_node(n, "loom folds Concat of constants only for 1-D integer lists (shapes)");
      out.ints.insert(out.ints.end(), v.ints.begin(), v.ints.end());
    }
    out.dims = {int64_t(out.ints.size())};
    return alias(n, out);
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
  const size_t rank = x.shape.size() + 1;
  if (!p.is_int || p.ints.size() != 2 * rank)
    fail_node(n, fmt::format("pads {} do not fit an input of rank {}", dims_text(p.ints), rank));
  // [begin of each axis, end of each axis]: only H and W of an image, alike at both ends.
  bool ok = rank == 4;
  for (size_t i = 0; ok && i < rank; ++i)
    ok = p.ints[i] == p.ints[i + rank] && p.ints[i] >= 0 && p.ints[i] <= 1024 &&
         (i >= 2 || p.ints[i] == 0);
  if (!ok)
    fail_node(n, fmt::format("pads {} on {}: loom reads Pad only as the same zero padding at "
                             "both ends of H and W before a Conv or AveragePool",
                             dims_text(p.ints), batch_shape_text(x.shape)));
  if (p.ints[2] == 0 && p.ints[3] == 0) return alias(n, x);
  Value v = x;
  v.kind = Value::kPattern;
  v.stage = Value::kPadded;
  v.pad_h = p.ints[2];
  v.pad_w = p.ints[3];
  v.node = n.name();
  alias(n, v);
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

void Importer::fold_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"start", "end"});
  const Value& x = activation(n, 0);
  std::vector<int64_t> dims = {kBatch};
  dims.insert(dims.end(), x.shape.begin(), x.shape.end());
  const int64_t rank = int64_t(dims.size());
  auto clamp = [&](int64_t i) {
    if (i < 0) i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  const int64_t start = clamp(attr_int(n, "start", 0));
  const int64_t end = clamp(attr_int(n, "end", rank));
  Value v;
  v.kind = Value::kConstant;
  v.is_int = true;
  if (start < end) v.ints.assign(dims.begin() + start, dims.begin() + end);
  v.dims = {int64_t(v.ints.size())};
  alias(n, v);
}

void Importer::fold_gather(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& data = constant(n, 0);
  const Value& idx = constant(n, 1);
  if (!data.is_int || data.dims.size() != 1 || !idx.is_int || idx.dims.size() > 1 ||
      attr_int(n, "axis", 0) != 0)
    fail_node(n, "loom folds Gather only to pick entries of a shape (1-D integers, axis 0)");
  Value v;
  v.kind = Value::kConstant;
  v.is_int = true;
  v.dims = idx.dims;
  const int64_t size = int64_t(data.ints.size());
  for (int64_t i : idx.ints) {
    if (i < 0) i += size;
    if (i < 0 || i >= size)
      fail_node(n, fmt::format("index {} is outside a shape of {} entries", i, size));
    v.ints.push_back(data.ints[size_t(i)]);
  }
  alias(n, v);
}

void Importer::fold_unsqueeze(const onnx::NodeProto& n) {
  only_attrs(n, {"axes"});
  const Value& data = constant(n, 0);
  std::vector<int64_t> axes = attr_ints(n, "axes", {});
  if (has_input(n, 1)) {
    const Value& a = constant(n, 1);
    if (!a.is_int) fail_node(n, "axes are not integers");
    axes = a.ints;
  }
  const int64_t rank = int64_t(data.dims.size() + axes.size());
  if (axes.empty() || rank > 8) fail_node(n, "axes are missing or too many");
  std::vector<bool> one(size_t(rank), false);
  for (int64_t a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || one[size_t(a)])
      fail_node(n, fmt::format("axes {} do not fit a result of rank {}", dims_text(axes), rank));
    one[size_t(a)] = true;
  }
  Value v = data;
  v.dims.clear();
  size_t from = 0;
  for (int64_t i = 0; i < rank; ++i) v.dims.push_back(one[size_t(i)] ? 1 : data.dims[from++]);
  alias(n, v);
}

void Importer::fold_cast(const onnx::NodeProto& n) {
  only_attrs(n, {"to", "saturate"});
  Value v = constant(n, 0);
  const int64_t to = attr_int(n, "to", 0);
  const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
  if (!to_int && !to_float) fail_node(n, fmt::format("cast to element type {} is not read", to));
  if (to_int && !v.is_int) {
    for (float f : v.floats)
      v.ints.push_back(std::isfinite(f) && std::fabs(f) < 1e15 ? int64_t(f) : 0);
    v.floats.clear();
    v.is_int = true;
  } else if (to_float && v.is_int) {
    for (int64_t i : v.ints) {
      if (i == kBatch) fail_node(n, "the batch size cannot become a float in loom's graph");
      v.floats.push_back(float(i));
    }
    v.ints.clear();
    v.is_int = false;
  }
  alias(n, v);
}

void Importer::constant_node(const onnx::NodeProto& n) {
  if (n.attribute_size() != 1) fail_node_input(n, "a Constant has exactly one attribute");
  const auto& a = n.attribute(0);
  Value v;
  v.kind = Value::kConstant;
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    v = tensor_value(a.t(), fmt::format("{}: value", node_text(n)));
  } else if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
    v.floats = {a.f()};
  } else if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
    v.floats.assign(a.floats().begin(), a.floats().end());
    v.dims = {int64_t(v.floats.size())};
  } else if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
    v.is_int = true;
    v.ints = {std::max(a.i(), kBatch + 1)};
  } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    v.is_int = true;
    for (int64_t i : a.ints()) v.ints.push_back(std::max(i, kBatch + 1));
    v.dims = {int64_t(v.ints.size())};
  } else {
    fail_node(n, fmt::format("attribute '{}' is not one loom reads (value, value_float(s), "
                             "value_int(s))",
                             a.name()));
  }
  alias(n, v);
}

}  // namespace

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
  return Importer(name, input_shape).run(model);
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
