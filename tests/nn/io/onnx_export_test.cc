#include "loom/nn/io/onnx_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/io/onnx_import.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/attention_parts.h"
#include "loom/nn/layers/batchnorm.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/embedding.h"
#include "loom/nn/layers/layernorm.h"
#include "loom/nn/layers/linear.h"
#include "loom/nn/layers/pad.h"
#include "loom/nn/layers/relative_position_bias.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

#if LOOM_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace loom::nn {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_ONNX_EXPORT() \
  if (!onnx_export_built()) GTEST_SKIP() << "this loom was built without libonnx-dev"

// Every layer type of the factory (tests/data/onnx/all_layers.toml says which parameters).
const std::string kAllLayers = [] {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/tests/data/onnx/all_layers.toml";
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}();

// A model with random parameters and BatchNorm statistics far from their initial 0 and 1, so
// an export that ignored them (or swapped mean and variance) could not pass.
std::unique_ptr<Model> random_model(std::vector<Node> nodes, const Shape& shape,
                                    uint64_t seed = 7) {
  auto m = std::make_unique<Model>(cpu_backend(), shape, 10, std::move(nodes));
  m->init_params(seed);
  std::mt19937 rng(uint32_t(seed + 1));
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  int64_t at = 0;
  for (const auto& l : m->layers()) {
    const int64_t half = l->num_state() / 2;  // BatchNorm: means, then variances
    for (int64_t k = 0; k < half; ++k) {
      m->state()[at + k] = u(rng);
      m->state()[at + half + k] = 0.5f + 2 * (u(rng) + 0.5f);
    }
    at += l->num_state();
  }
  for (int64_t k = 0; k < m->num_params(); ++k) m->params()[k] += 0.1f * u(rng);
  return m;
}

std::unique_ptr<Model> model_from_config(const std::vector<std::string>& sets, const Shape& shape) {
  Config cfg;
  for (const auto& s : sets) cfg.set_override(s);
  return random_model(build_model_nodes(plan::read_model_spec(cfg), shape, 10), shape);
}

std::unique_ptr<Model> model_from_toml(const std::string& toml, const Shape& shape) {
  return random_model(build_nodes(graph_from_string(toml, "graph.toml"), shape), shape);
}

std::vector<float> inputs(const Shape& shape, int64_t batch) {
  std::mt19937 rng(99);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * numel(shape)));
  for (float& v : x) v = g(rng);
  return x;
}

std::vector<float> eval(Model& m, const std::vector<float>& x, int64_t batch) {
  const float* y = m.forward(x.data(), batch, StepInfo{false, 0, 0});
  return {y, y + batch * numel(m.output_shape(int(m.layers().size()) - 1))};
}

// Exports `m`, reads the file back with loom's importer and compares the two forwards in
// evaluation; returns the imported model.
std::unique_ptr<Model> round_trip(Model& m) {
  const std::string bytes = onnx_model_bytes(m, m.params(), m.state());
  GraphSpec g = graph_from_onnx_bytes(bytes.data(), bytes.size(), "export.onnx", m.input_shape());
  auto back =
      std::make_unique<Model>(cpu_backend(), m.input_shape(), 10, build_nodes(g, m.input_shape()));
  back->init_params(12345);  // ignored: every layer has the file's weights
  const int64_t batch = 6;
  const auto x = inputs(m.input_shape(), batch);
  const auto want = eval(m, x, batch);
  const auto got = eval(*back, x, batch);
  EXPECT_EQ(got.size(), want.size());
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(want[i])));
  }
  EXPECT_GT(max_ref, 0.0);
  // The same layers on the same parameters compute the same bits.
  EXPECT_EQ(max_diff, 0.0) << "max|ref| " << max_ref;
  // Same parameters under the same layer names, same BatchNorm statistics.
  EXPECT_EQ(back->num_params(), m.num_params());
  EXPECT_EQ(back->num_state(), m.num_state());
  for (const ParamRange& r : m.param_ranges()) {
    const int j = back->find_layer(m.layer_name(r.layer));
    EXPECT_GE(j, 0) << m.layer_name(r.layer);
    if (j < 0) continue;
    for (const ParamRange& s : back->param_ranges()) {
      if (s.layer != j) continue;
      EXPECT_EQ(s.count, r.count) << m.layer_name(r.layer);
      int64_t differ = 0;
      for (int64_t k = 0; k < std::min(r.count, s.count); ++k)
        differ += back->params()[s.offset + k] != m.params()[r.offset + k];
      EXPECT_EQ(differ, 0) << m.layer_name(r.layer);
    }
  }
  return back;
}

// The layer types of `m` in order, leaving out the flatten the importer puts after a
// globalavgpool2d (ONNX's GlobalAveragePool keeps a 1x1 plane, loom's layer does not).
std::vector<std::string> exported_kinds(const Model& m) {
  std::vector<std::string> out;
  for (size_t i = 0; i < m.layers().size(); ++i) {
    const auto& in = m.layer_inputs(int(i));
    if (m.layers()[i]->kind() == "Flatten" && in.size() == 1 && in[0] >= 0 &&
        m.layers()[size_t(in[0])]->kind() == "GlobalAvgPool2d")
      continue;
    out.push_back(m.layers()[i]->kind() + " " + m.layer_name(int(i)));
  }
  return out;
}

TEST(OnnxExport, MlpRoundTripsThroughTheImporter) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=mlp", "mlp.hidden=[48, 24]", "mlp.dropout=0.25"}, {1, 28, 28});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
}

TEST(OnnxExport, CnnRoundTripsThroughTheImporter) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=cnn", "cnn.channels=[4, 8]", "cnn.hidden=32"}, {1, 28, 28});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
}

TEST(OnnxExport, Resnet20RoundTripsThroughTheImporter) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=resnet20"}, {1, 12, 12});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
}

TEST(OnnxExport, EveryLayerTypeRoundTripsThroughTheImporter) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(kAllLayers, {1, 28, 28});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
  // The importer gives back each layer's own parameters.
  const Model& b = *back;
  auto bn = dynamic_cast<const BatchNorm*>(b.layers()[size_t(b.find_layer("stem_bn"))].get());
  ASSERT_NE(bn, nullptr);
  EXPECT_FLOAT_EQ(bn->eps(), 1e-3f);
  EXPECT_NEAR(bn->momentum(), 0.2f, 1e-6);
  auto dr = dynamic_cast<const Dropout*>(b.layers()[size_t(b.find_layer("dropout_0"))].get());
  ASSERT_NE(dr, nullptr);
  EXPECT_FLOAT_EQ(dr->p(), 0.3f);
  auto conv = dynamic_cast<const Conv2d*>(b.layers()[size_t(b.find_layer("grouped"))].get());
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->options().groups, 2);
  EXPECT_EQ(conv->options().kernel_w, 5);
  EXPECT_FALSE(conv->options().bias);
}

// A transformer block written out of layers (tests/data/onnx/attention_block.toml): linear over
// [positions, features], position_embedding, layernorm, slices, reshapes and transposes into
// heads, matmul, scale and the causal softmax come back as themselves, with their parameters.
TEST(OnnxExport, AttentionBlockRoundTripsThroughTheImporter) {
  SKIP_WITHOUT_ONNX_EXPORT();
  std::ifstream f(std::string(LOOM_SOURCE_DIR) + "/tests/data/onnx/attention_block.toml");
  const std::string toml((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto m = model_from_toml(toml, {1, 28, 28});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
  const Model& b = *back;
  auto att = dynamic_cast<const Softmax*>(b.layers()[size_t(b.find_layer("att"))].get());
  ASSERT_NE(att, nullptr);
  EXPECT_TRUE(att->causal());
  auto ln = dynamic_cast<const LayerNorm*>(b.layers()[size_t(b.find_layer("ln2"))].get());
  ASSERT_NE(ln, nullptr);
  EXPECT_FLOAT_EQ(ln->eps(), 1e-6f);
  auto sc = dynamic_cast<const Scale*>(b.layers()[size_t(b.find_layer("scaled"))].get());
  ASSERT_NE(sc, nullptr);
  EXPECT_FLOAT_EQ(sc->factor(), 0.35355339f);
}

// Window attention's relative position bias and ViT's class token come back as themselves,
// with their tables.
TEST(OnnxExport, RelativePositionBiasAndClassTokenRoundTrip) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(R"(
[[layer]]
type = "reshape"
shape = [49, 4, 4]
[[layer]]
type = "relative_position_bias"
name = "bias"
window = 2
heads = 49
[[layer]]
type = "reshape"
shape = [49, 16]
[[layer]]
type = "class_token"
name = "cls"
count = 2
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out = 10
)",
                           {1, 28, 28});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
  const Model& b = *back;
  auto bias =
      dynamic_cast<const RelativePositionBias*>(b.layers()[size_t(b.find_layer("bias"))].get());
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->window(), 2);
  EXPECT_EQ(bias->heads(), 49);
  auto cls = dynamic_cast<const ClassToken*>(b.layers()[size_t(b.find_layer("cls"))].get());
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(cls->count(), 2);
}

// A fixed_bias (an imported constant addend) is written as a Constant node and read back as
// itself, holding its values: the round trip's outputs agree to the bit only if they came back.
// A pad comes back as itself, with its counts.
TEST(OnnxExport, FixedBiasAndPadRoundTrip) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(R"(
[[layer]]
type = "fixed_bias"
name = "mask"
[[layer]]
type = "pad"
name = "padded"
before = [0, 1, 0]
after = [0, 2, 3]
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out = 10
)",
                           {1, 28, 28});
  ASSERT_EQ(m->num_state(), 28 * 28);
  for (int64_t k = 0; k < m->num_state(); ++k) m->state()[k] = float(k % 7) - 3.0f;
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
  ASSERT_EQ(back->num_state(), m->num_state());
  for (int64_t k = 0; k < m->num_state(); ++k) ASSERT_EQ(back->state()[k], m->state()[k]) << k;
  auto pad = dynamic_cast<const Pad*>(back->layers()[size_t(back->find_layer("padded"))].get());
  ASSERT_NE(pad, nullptr);
  EXPECT_EQ(pad->before(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(pad->after(), (std::vector<int64_t>{0, 2, 3}));
}

// batchnorm1d over [C, L] samples: the importer reads BatchNormalization of rank 3 too.
TEST(OnnxExport, BatchNormOverSequencesRoundTrips) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(R"(
[[layer]]
type = "batchnorm1d"
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out = 10
)",
                           {4, 7});
  auto back = round_trip(*m);
  EXPECT_EQ(exported_kinds(*back), exported_kinds(*m));
}

#if LOOM_HAVE_ONNX

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto p;
  EXPECT_TRUE(p.ParseFromString(bytes));
  return p;
}

const onnx::TensorProto* find_initializer(const onnx::ModelProto& p, const std::string& name) {
  for (const auto& t : p.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::vector<float> floats(const onnx::TensorProto& t) {
  std::vector<float> v(t.raw_data().size() / sizeof(float));
  std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
  return v;
}

TEST(OnnxExport, InputOutputOpsetAndInitializerNames) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=cnn", "cnn.channels=[4]", "cnn.hidden=16"}, {1, 28, 28});
  onnx::ModelProto p = parse(onnx_model_bytes(*m, m->params(), m->state()));
  ASSERT_EQ(p.opset_import_size(), 1);
  EXPECT_EQ(p.opset_import(0).version(), kOnnxExportOpset);
  EXPECT_EQ(p.producer_name(), "loom");
  const auto& g = p.graph();
  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), "input");
  const auto& in = g.input(0).type().tensor_type().shape();
  ASSERT_EQ(in.dim_size(), 4);
  EXPECT_EQ(in.dim(0).dim_param(), "batch");
  EXPECT_EQ(in.dim(1).dim_value(), 1);
  EXPECT_EQ(in.dim(3).dim_value(), 28);
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(g.output(0).name(), "logits");
  const auto& out = g.output(0).type().tensor_type().shape();
  ASSERT_EQ(out.dim_size(), 2);
  EXPECT_EQ(out.dim(1).dim_value(), 10);

  // conv2d_0.weight holds the first parameters of the flat buffer, in PyTorch's layout.
  const auto* w = find_initializer(p, "conv2d_0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(std::vector<int64_t>(w->dims().begin(), w->dims().end()),
            (std::vector<int64_t>{4, 1, 5, 5}));
  const auto wv = floats(*w);
  ASSERT_EQ(wv.size(), size_t(100));
  for (size_t k = 0; k < wv.size(); ++k) ASSERT_EQ(wv[k], m->params()[k]);
  EXPECT_NE(find_initializer(p, "conv2d_0.bias"), nullptr);
  const int last = m->param_ranges().back().layer;
  EXPECT_NE(find_initializer(p, m->layer_name(last) + ".weight"), nullptr);

  // Nodes carry the layers' names; the CNN's Linear is a Gemm on W^T.
  bool gemm = false;
  for (const auto& n : g.node()) {
    if (n.op_type() != "Gemm" || n.name() != m->layer_name(last)) continue;
    gemm = true;
    EXPECT_EQ(n.output(0), "logits");
    ASSERT_EQ(n.attribute_size(), 1);
    EXPECT_EQ(n.attribute(0).name(), "transB");
    EXPECT_EQ(n.attribute(0).i(), 1);
  }
  EXPECT_TRUE(gemm);
}

TEST(OnnxExport, BatchNormWritesRunningStatisticsAndEvalNodes) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(kAllLayers, {1, 28, 28});
  onnx::ModelProto p = parse(onnx_model_bytes(*m, m->params(), m->state()));
  const auto* mean = find_initializer(p, "stem_bn.running_mean");
  const auto* var = find_initializer(p, "stem_bn.running_var");
  ASSERT_NE(mean, nullptr);
  ASSERT_NE(var, nullptr);
  // stem_bn is the first layer with state: state()[0..8) means, [8..16) variances.
  const auto mv = floats(*mean), vv = floats(*var);
  ASSERT_EQ(mv.size(), size_t(8));
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(mv[size_t(k)], m->state()[k]);
    EXPECT_EQ(vv[size_t(k)], m->state()[8 + k]);
  }
  std::map<std::string, int> ops;
  for (const auto& n : p.graph().node()) {
    ++ops[n.op_type()];
    if (n.op_type() == "BatchNormalization") {
      EXPECT_EQ(n.output_size(), 1) << n.name();
    }
    if (n.op_type() == "Dropout") {
      EXPECT_EQ(n.input_size(), 2) << "no training_mode input";
    }
  }
  // GELU as Div, Erf, Add, Mul, Mul (opset 13 has no Gelu); SiLU as Sigmoid and Mul; Hardswish
  // as HardSigmoid and Mul (HardSwish is an op from opset 14 on), beside a Hardsigmoid of its
  // own; ReLU6 as Clip; the add of three inputs as a Sum; the squeeze-and-excitation gate as
  // GlobalAveragePool (keeping its dims, no Flatten), Conv, Sigmoid and Mul; the channel shuffle
  // as Reshape, Transpose, Reshape, cut by a Slice.
  EXPECT_EQ(ops["Erf"], 1);
  EXPECT_EQ(ops["Div"], 1);
  EXPECT_EQ(ops["Mul"], 5);
  EXPECT_EQ(ops["GlobalAveragePool"], 2);
  EXPECT_EQ(ops["Flatten"], 2);  // the flatten layer's, and the other pool's
  EXPECT_EQ(ops["Reshape"], 2);
  EXPECT_EQ(ops["Transpose"], 1);
  EXPECT_EQ(ops["Slice"], 1);
  EXPECT_EQ(ops["HardSigmoid"], 2);
  EXPECT_EQ(ops["Clip"], 1);
  EXPECT_EQ(ops["Add"], 1);
  EXPECT_EQ(ops["Sum"], 1);
  EXPECT_EQ(ops["Sigmoid"], 3);
  EXPECT_EQ(ops["Concat"], 2);
  EXPECT_EQ(ops["BatchNormalization"], 2);
  EXPECT_EQ(ops["Conv"], 4);
}

TEST(OnnxExport, FixedBatchOption) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=mlp", "mlp.hidden=[8]"}, {1, 28, 28});
  OnnxExportOptions o;
  o.batch = 32;
  o.doc = "a test";
  onnx::ModelProto p = parse(onnx_model_bytes(*m, m->params(), m->state(), o));
  EXPECT_EQ(p.graph().input(0).type().tensor_type().shape().dim(0).dim_value(), 32);
  EXPECT_EQ(p.graph().output(0).type().tensor_type().shape().dim(0).dim_value(), 32);
  EXPECT_EQ(p.doc_string(), "a test");
}

// The importer reads a Sum only over activations of one shape.
TEST(OnnxExport, ImportedSumOfDifferentShapesNamesTheNode) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(kAllLayers, {1, 28, 28});
  onnx::ModelProto p = parse(onnx_model_bytes(*m, m->params(), m->state()));
  bool edited = false;
  for (auto& n : *p.mutable_graph()->mutable_node())
    if (n.op_type() == "Sum") {
      n.set_input(2, "input");  // [batch, 1, 28, 28] among [batch, 8, 28, 28]
      edited = true;
    }
  ASSERT_TRUE(edited);
  std::string bytes;
  ASSERT_TRUE(p.SerializeToString(&bytes));
  try {
    graph_from_onnx_bytes(bytes.data(), bytes.size(), "edited.onnx", {1, 28, 28});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node 'add_0' (Sum)"), std::string::npos) << what;
    EXPECT_NE(what.find("[batch, 1, 28, 28]"), std::string::npos) << what;
  }
}

#endif  // LOOM_HAVE_ONNX

// A layer loom's factory does not make, as the model-parallel rewrite puts in a model.
class Mystery final : public Layer {
 public:
  std::string kind() const override { return "Mystery"; }
  Shape build(const Shape& input) override { return input; }
  void forward(const Context&, const float*, float*, int64_t) override {}
  void backward(const Context&, const float*, const float*, const float*, float*,
                int64_t) override {}
};

TEST(OnnxExport, UnsupportedLayerIsAnErrorNamingIt) {
  SKIP_WITHOUT_ONNX_EXPORT();
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(12, 10));
  layers.push_back(std::make_unique<Mystery>());
  Model m(cpu_backend(), {12}, 10, std::move(layers));
  m.init_params(1);
  try {
    onnx_model_bytes(m, m.params(), m.state());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 'mystery_0' (Mystery)"), std::string::npos) << what;
    EXPECT_NE(what.find("no form"), std::string::npos) << what;
  }
}

// ceil_mode whose last window would start in the padding: loom (and PyTorch) drop it, ONNX's
// pools keep it, so the export refuses rather than write a model of another output size.
TEST(OnnxExport, CeilModeWindowInThePaddingIsRefused) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_toml(R"(
[[layer]]
type = "maxpool2d"
name = "edge_pool"
kernel = 2
padding = 1
ceil_mode = true
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out = 10
)",
                           {1, 5, 5});
  try {
    onnx_model_bytes(*m, m->params(), m->state());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 'edge_pool'"), std::string::npos) << what;
    EXPECT_NE(what.find("ceil_mode"), std::string::npos) << what;
  }
}

TEST(OnnxExport, StatefulModelWithoutStateIsRefused) {
  SKIP_WITHOUT_ONNX_EXPORT();
  auto m = model_from_config({"model=resnet20"}, {1, 8, 8});
  EXPECT_THROW(onnx_model_bytes(*m, m->params(), nullptr), ConfigError);
}

TEST(OnnxExport, WritesAtomicallyAndLeavesTheFileOnFailure) {
  SKIP_WITHOUT_ONNX_EXPORT();
  const fs::path dir = fs::temp_directory_path() / fmt::format("loom_onnx_export_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto m = model_from_config({"model=mlp", "mlp.hidden=[8]"}, {1, 28, 28});
  const std::string path = (dir / "mlp.onnx").string();
  export_onnx(*m, m->params(), m->state(), path);
  std::ifstream f(path, std::ios::binary);
  const std::string written{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_EQ(written, onnx_model_bytes(*m, m->params(), m->state()));
  // Nothing but the file: the temporary is gone.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  // A model the export refuses leaves the earlier file as it was.
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(12, 10));
  layers.push_back(std::make_unique<Mystery>());
  Model bad(cpu_backend(), {12}, 10, std::move(layers));
  EXPECT_THROW(export_onnx(bad, bad.params(), bad.state(), path), ConfigError);
  std::ifstream g(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(g), std::istreambuf_iterator<char>()),
            written);

  // A folder that does not exist: InputError naming the path.
  const std::string nowhere = (dir / "no" / "such" / "m.onnx").string();
  try {
    export_onnx(*m, m->params(), m->state(), nowhere);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "no" / "such").string()), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// A model over the inline limit (lowered here; 1 GiB by default) keeps its tensors in
// <file>.data beside the model, which loom's importer reads back to the same network.
TEST(OnnxExport, LargeModelsKeepTheirTensorsInAFileBeside) {
  SKIP_WITHOUT_ONNX_EXPORT();
  const fs::path dir = fs::temp_directory_path() / fmt::format("loom_onnx_external_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto m = model_from_config({"model=mlp", "mlp.hidden=[64]"}, {1, 28, 28});
  OnnxExportOptions o;
  o.inline_bytes = 1 << 16;
  ASSERT_TRUE(onnx_needs_external_data(*m, o));
  EXPECT_FALSE(onnx_needs_external_data(*m));
  const std::string path = (dir / "mlp.onnx").string();
  export_onnx(*m, m->params(), m->state(), path, o);
  const std::string data = onnx_external_data_path(path);
  ASSERT_TRUE(fs::exists(data));
  // The weight matrices (over 1 KiB each) are outside; the model file is what is left.
  EXPECT_GT(fs::file_size(data), fs::file_size(path));
  EXPECT_GE(fs::file_size(data), size_t(784 * 64 * 4));
#if LOOM_HAVE_ONNX
  if (onnx::ModelProto p; p.ParseFromString([&] {
        std::ifstream f(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      }())) {
    int outside = 0;
    for (const auto& t : p.graph().initializer())
      outside += t.data_location() == onnx::TensorProto::EXTERNAL;
    EXPECT_GE(outside, 2);
  } else {
    ADD_FAILURE() << path << " does not parse";
  }
#endif
  GraphSpec g = graph_from_onnx(path, m->input_shape());
  Model back(cpu_backend(), m->input_shape(), 10, build_nodes(g, m->input_shape()));
  back.init_params(12345);  // ignored: every layer has the file's weights
  const auto x = inputs(m->input_shape(), 3);
  EXPECT_EQ(eval(back, x, 3), eval(*m, x, 3));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace loom::nn
