// Models as graphs: [[layer]] tables, names, inputs and shapes, a DAG's gradients (a layer read
// twice sums its gradients) against finite differences, and the errors a bad graph gets.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <tuple>

#include "loom/core/error.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/linear.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::expect_gradient_matches;
using testing::random_vector;
using testing::Tolerance;

// Two branches from one flatten (it has two readers), joined by an Add and a Concat; the
// Linear "skip" reads the model input's flatten directly.
const char* kDag = R"(
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
name = "a"
out = 6
[[layer]]
type = "relu"
[[layer]]
type = "linear"
name = "skip"
input = "flatten_0"
out = 6
[[layer]]
type = "add"
inputs = ["relu_0", "skip"]
[[layer]]
type = "concat"
inputs = ["add_0", "a"]
[[layer]]
type = "linear"
out = 3
)";

std::unique_ptr<Model> dag_model() {
  return std::make_unique<Model>(cpu_backend(), Shape{2, 2, 3}, 3,
                                 build_nodes(graph_from_string(kDag, "dag.toml"), {2, 2, 3}));
}

TEST(Graph, NamesInputsAndShapesAreInferred) {
  auto m = dag_model();
  ASSERT_EQ(m->layers().size(), 7u);
  EXPECT_EQ(m->layer_name(0), "flatten_0");
  EXPECT_EQ(m->layer_name(1), "a");
  EXPECT_EQ(m->layer_name(2), "relu_0");
  EXPECT_EQ(m->layer_name(4), "add_0");
  EXPECT_EQ(m->layer_name(6), "linear_2");  // the third linear: the two named ones count
  EXPECT_EQ(m->layer_inputs(3), (std::vector<int>{0}));
  EXPECT_EQ(m->layer_inputs(4), (std::vector<int>{2, 3}));
  EXPECT_EQ(m->output_shape(5), (Shape{12}));
  EXPECT_EQ(m->num_params(), (12 * 6 + 6) * 2 + 12 * 3 + 3);
  EXPECT_EQ(m->find_layer("skip"), 3);
  EXPECT_EQ(m->find_layer("nope"), -1);
  const std::string s = m->summary();
  EXPECT_NE(s.find("add_0"), std::string::npos) << s;
  EXPECT_NE(s.find("relu_0,skip"), std::string::npos) << s;
}

TEST(Graph, DagGradientsMatchFiniteDifferences) {
  auto model = dag_model();
  model->init_params(3);
  const int64_t batch = 3;
  std::vector<float> x = random_vector(batch * 12, 5);
  const std::vector<int32_t> labels = {0, 2, 1};
  const StepInfo step{true, 0, 0};
  auto loss = [&]() {
    model->forward(x.data(), batch, step);
    return model->loss(labels.data(), 1.0f / float(batch)).loss_sum / double(batch);
  };
  loss();
  std::fill(model->grads(), model->grads() + model->num_params(), 99.0f);
  model->backward();
  const std::vector<float> analytic(model->grads(), model->grads() + model->num_params());
  model->backward();  // from the same forward: the same gradients, not doubled
  EXPECT_EQ(std::vector<float>(model->grads(), model->grads() + model->num_params()), analytic);
  std::vector<float> params(model->params(), model->params() + model->num_params());
  auto loss_at = [&]() {
    std::copy(params.begin(), params.end(), model->params());
    return loss();
  };
  // The float loss rounds at about 1e-7 of its size, so h = 1e-2 keeps the rounding of the
  // difference near 1e-5; a flatten whose second reader's gradient were dropped or doubled
  // would be off by its whole share, far beyond 1%.
  expect_gradient_matches("dparams", params, analytic, loss_at, Tolerance{1e-2, 1e-2, 3e-5});
}

TEST(Graph, ReadyRangesArriveInReverseOrder) {
  auto model = dag_model();
  model->init_params(1);
  std::vector<float> x = random_vector(2 * 12, 6);
  const std::vector<int32_t> labels = {0, 1};
  model->forward(x.data(), 2, StepInfo{true, 0, 0});
  model->loss(labels.data(), 0.5f);
  std::vector<int> layers;
  model->backward([&](const ParamRange& r) { layers.push_back(r.layer); });
  EXPECT_EQ(layers, (std::vector<int>{6, 3, 1}));
}

// A residual block: ReLU after BatchNorm and after the Add, each its input's only reader, run
// in place, and so does the Add over bn2 (its first input); the stem's ReLU is read by the block
// and the shortcut, but its input (BatchNorm) is read by it alone, so it runs in place too.
// `apart` puts a Dropout(p = 0), which passes values unchanged but reads its own output in
// backward, before the stem's ReLU and before the Add's first input: the same values with that
// ReLU and the Add in buffers of their own (the model without in-place layers is checked against
// finite differences by the layers' own tests and DagGradientsMatchFiniteDifferences).
std::string residual_graph(bool apart) {
  auto layer = [](const std::string& type, const std::string& name, const std::string& rest) {
    return "[[layer]]\ntype = \"" + type + "\"\n" +
           (name.empty() ? "" : "name = \"" + name + "\"\n") + rest;
  };
  auto conv_bn = [&](const std::string& conv, const std::string& bn) {
    return layer("conv2d", conv, "out = 4\nkernel = 3\npadding = 1\n") +
           layer("batchnorm2d", bn, "");
  };
  auto keep = [&](const std::string& name) {
    return apart ? layer("dropout", name, "p = 0.0\n") : std::string();
  };
  return conv_bn("stem", "stem_bn") + keep("keep_stem") + layer("relu", "stem_relu", "") +
         conv_bn("", "") + layer("relu", "", "") + conv_bn("", "bn2") + keep("keep2") +
         layer("add", "",
               "inputs = [\"" + std::string(apart ? "keep2" : "bn2") + "\", \"stem_relu\"]\n") +
         layer("relu", "", "") + layer("flatten", "", "") + layer("linear", "", "out = 3\n");
}

TEST(Graph, ReluAndAddRunInPlaceWithTheSameValuesAndGradients) {
  const Shape in{1, 5, 5};
  auto build = [&](bool dropout) {
    return std::make_unique<Model>(
        cpu_backend(), in, 3,
        build_nodes(graph_from_string(residual_graph(dropout), "residual.toml"), in));
  };
  auto in_place = build(false), apart = build(true);
  // Apart, the stem's ReLU and the Add keep outputs of their own (4 x 5 x 5 each), and the two
  // Dropouts' are two more.
  const int64_t tensor = 4 * 5 * 5;
  EXPECT_EQ(apart->activation_floats_per_sample() - in_place->activation_floats_per_sample(),
            4 * tensor);

  // The same parameters (their draws follow the layer index, which the Dropout shifts).
  in_place->init_params(4);
  ASSERT_EQ(in_place->num_params(), apart->num_params());
  std::copy(in_place->params(), in_place->params() + in_place->num_params(), apart->params());
  const int64_t batch = 3;
  const std::vector<float> x = random_vector(batch * 25, 8);
  const std::vector<int32_t> labels = {2, 0, 1};
  const StepInfo step{true, 0, 0};
  auto run = [&](Model& m) {
    const float* out = m.forward(x.data(), batch, step);
    std::vector<float> logits(out, out + batch * 3);
    const double loss = m.loss(labels.data(), 1.0f / float(batch)).loss_sum;
    m.backward();
    return std::make_tuple(logits, loss, std::vector<float>(m.grads(), m.grads() + m.num_params()));
  };
  const auto [logits_a, loss_a, grads_a] = run(*in_place);
  const auto [logits_b, loss_b, grads_b] = run(*apart);
  EXPECT_EQ(logits_a, logits_b);
  EXPECT_EQ(loss_a, loss_b);
  EXPECT_EQ(grads_a, grads_b);
}

TEST(Graph, EveryReluAndAddOfResNet20RunsInPlace) {
  ModelSpec spec;
  spec.model = "resnet20";
  const auto m = build_model(spec, cpu_backend(), Shape{1, 28, 28}, 10);
  int64_t outputs = 0, shared = 0, relus = 0, adds = 0;
  for (size_t i = 0; i < m->layers().size(); ++i) {
    const std::string kind = m->layers()[i]->kind();
    outputs += numel(m->output_shape(int(i)));
    if (kind == "ReLU" || kind == "Add") shared += numel(m->output_shape(int(i)));
    relus += kind == "ReLU";
    adds += kind == "Add";
  }
  EXPECT_EQ(relus, 19);
  EXPECT_EQ(adds, 9);
  EXPECT_EQ(m->activation_floats_per_sample(), outputs - shared);
}

// A layer that may run in place and records the buffers it was given.
class InPlaceProbe final : public Layer {
 public:
  explicit InPlaceProbe(const float** x, float** y) : x_(x), y_(y) {}
  std::string kind() const override { return "InPlaceProbe"; }
  bool runs_in_place() const override { return true; }
  Shape build(const Shape& input) override { return input; }
  void forward(const Context&, const float* x, float* y, int64_t) override { *x_ = x, *y_ = y; }
  void backward(const Context&, const float*, const float*, const float*, float*,
                int64_t) override {}

 private:
  const float** x_;
  float** y_;
};

TEST(Graph, AnInPlaceLayerIsGivenItsInputsBufferToWrite) {
  // After a Linear (whose backward does not read its output) the probe writes over its input;
  // after a ReLU (whose backward does) it gets a buffer of its own.
  for (const bool after_relu : {false, true}) {
    const float* x = nullptr;
    float* y = nullptr;
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Flatten>());
    layers.push_back(std::make_unique<Linear>(4, 3));
    if (after_relu) layers.push_back(std::make_unique<ReLU>());
    layers.push_back(std::make_unique<InPlaceProbe>(&x, &y));
    Model m(cpu_backend(), Shape{2, 2}, 3, std::move(layers));
    m.init_params(1);
    const std::vector<float> in = random_vector(2 * 4, 3);
    m.forward(in.data(), 2, StepInfo{true, 0, 0});
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x == y, !after_relu) << (after_relu ? "after a ReLU" : "after a Linear");
  }
}

TEST(Graph, ReluKeepsItsOwnBufferWhereItsInputHasAnotherReader) {
  // kDag: relu_0 reads "a", which the Concat reads too.
  auto m = dag_model();
  int64_t outputs = 0;
  for (size_t i = 0; i < m->layers().size(); ++i) outputs += numel(m->output_shape(int(i)));
  EXPECT_EQ(m->activation_floats_per_sample(), outputs);
}

TEST(Graph, TomlRoundTrip) {
  const GraphSpec g = graph_from_string(kDag, "dag.toml");
  const GraphSpec back = graph_from_string(graph_to_toml(g, "title"), "back.toml");
  ASSERT_EQ(back.layers.size(), g.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].type, g.layers[i].type);
    EXPECT_EQ(back.layers[i].name, g.layers[i].name);
    EXPECT_EQ(back.layers[i].inputs, g.layers[i].inputs);
    ASSERT_EQ(back.layers[i].params.size(), g.layers[i].params.size());
    for (const auto& [key, v] : g.layers[i].params) {
      ASSERT_EQ(back.layers[i].params.count(key), 1u) << key;
      EXPECT_EQ(config_value_text(back.layers[i].params.at(key)), config_value_text(v)) << key;
    }
  }
  // The built-in MLP written out and read back builds the same model.
  Config cfg;
  const GraphSpec mlp = model_graph(plan::read_model_spec(cfg), {1, 28, 28}, 10);
  Model a(cpu_backend(), {1, 28, 28}, 10, build_nodes(mlp, {1, 28, 28}));
  Model b(cpu_backend(), {1, 28, 28}, 10,
          build_nodes(graph_from_string(graph_to_toml(mlp), "mlp.toml"), {1, 28, 28}));
  EXPECT_EQ(a.summary(), b.summary());
}

TEST(Graph, InlineLayersInTheRunConfig) {
  Config cfg = Config::from_string(
      "workers = 2\n[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nout = 4\n",
      "run.toml");
  auto m = build_model(plan::read_model_spec(cfg), cpu_backend(), {2, 3}, 4);
  EXPECT_EQ(m->num_params(), 6 * 4 + 4);
  // The config's canonical text (what every rank compares, and checkpoints keep) reads back.
  Config again = Config::from_string(cfg.canonical_text(), "canon");
  EXPECT_EQ(build_model(plan::read_model_spec(again), cpu_backend(), {2, 3}, 4)->summary(),
            m->summary());
}

TEST(Graph, GraphFileByPath) {
  const std::string path = ::testing::TempDir() + "loom_graph_test.toml";
  std::ofstream(path) << kDag;
  Config cfg;
  cfg.set("model", path);
  EXPECT_EQ(build_model(plan::read_model_spec(cfg), cpu_backend(), {2, 2, 3}, 3)->layers().size(),
            7u);
  cfg.set("model", path + ".missing.toml");
  EXPECT_THROW(build_model(plan::read_model_spec(cfg), cpu_backend(), {2, 2, 3}, 3), InputError);
}

// The error names the layer (or file and line) and says what is wrong.
void expect_graph_error(const std::string& toml, const std::vector<std::string>& words,
                        const Shape& input = {2, 2, 3}) {
  SCOPED_TRACE(toml);
  try {
    Config cfg = Config::from_string(toml, "bad.toml");
    build_model(plan::read_model_spec(cfg), cpu_backend(), input, 3);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(Graph, BadGraphsAreErrorsNamingTheLayer) {
  expect_graph_error("[[layer]]\ntype = \"convolution\"\n",
                     {"bad.toml:2", "unknown layer type 'convolution'", "conv2d"});
  expect_graph_error(
      "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nout = 3\n"
      "widht = 4\n",
      {"layer 'linear_0'", "unknown parameter 'widht'", "out, bias"});
  expect_graph_error("[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\n",
                     {"layer 'linear_0'", "'out' is required"});
  expect_graph_error(
      "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nname = \"a\"\nout = 4\n"
      "[[layer]]\ntype = \"add\"\ninputs = [\"a\", \"flatten_0\"]\n",
      {"layer 'add_0'", "[4]", "[12]"});
  expect_graph_error(
      "[[layer]]\ntype = \"relu\"\ninput = \"b\"\nname = \"a\"\n[[layer]]\n"
      "type = \"relu\"\ninput = \"a\"\nname = \"b\"\n",
      {"cycle", "'a'", "'b'"});
  expect_graph_error("[[layer]]\ntype = \"relu\"\ninput = \"nowhere\"\n",
                     {"layer 'relu_0'", "'nowhere' is not a layer"});
  expect_graph_error("[[layer]]\ntype = \"conv2d\"\nout = 2\nkernel = 5\n",
                     {"layer 'conv2d_0'", "larger than the input"});
  expect_graph_error(
      "[[layer]]\ntype = \"relu\"\nname = \"x\"\n[[layer]]\ntype = \"relu\"\n"
      "name = \"x\"\n",
      {"layer 'x'", "taken"});
  expect_graph_error(
      "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nout = 3\n"
      "[[layer]]\ntype = \"linear\"\nout = 3\ninput = \"flatten_0\"\n",
      {"2 outputs", "linear_0", "linear_1"});
  expect_graph_error("[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nout = 5\n",
                     {"[5]", "3 classes"});
  expect_graph_error("[[layer]]\ntype = \"flatten\"\nout = 3\n",
                     {"unknown parameter 'out'", "no parameters"});
  expect_graph_error("[[layer]]\nname = \"x\"\n", {"bad.toml:2", "no `type`"});
  expect_graph_error("model = \"mlp\"\n[[layer]]\ntype = \"flatten\"\n",
                     {"key 'model'", "[[layer]] tables"});
  expect_graph_error("model = \"resnet21\"\n", {"resnet21", "resnet20", "graph file"});
  expect_graph_error("[[layer]]\ntype = \"add\"\n", {"layer 'add_0'", "2 to 64 inputs"});
}

// loss.label_smoothing reaches the loss: -sum_c t_c log softmax_c with t = (1 - eps) onehot +
// eps / C, computed here in double from the logits.
TEST(Graph, LabelSmoothingFromTheConfig) {
  Config cfg = Config::from_string(
      "loss.label_smoothing = 0.2\n[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = "
      "\"linear\"\nout = 3\n",
      "s.toml");
  auto m = build_model(plan::read_model_spec(cfg), cpu_backend(), {4}, 3);
  m->init_params(2);
  const std::vector<float> x = random_vector(2 * 4, 9);
  const std::vector<int32_t> labels = {2, 0};
  const float* logits = m->forward(x.data(), 2, StepInfo{false, 0, 0});
  double expect = 0;
  for (int r = 0; r < 2; ++r) {
    double mx = -1e30, z = 0;
    for (int c = 0; c < 3; ++c) mx = std::max(mx, double(logits[r * 3 + c]));
    for (int c = 0; c < 3; ++c) z += std::exp(double(logits[r * 3 + c]) - mx);
    for (int c = 0; c < 3; ++c) {
      const double t = (c == labels[size_t(r)] ? 0.8 : 0.0) + 0.2 / 3;
      expect -= t * (double(logits[r * 3 + c]) - mx - std::log(z));
    }
  }
  EXPECT_NEAR(m->loss(labels.data(), 0.5f).loss_sum, expect, 1e-5);
}

TEST(Graph, GraphFileHoldsOnlyLayers) {
  EXPECT_THROW(graph_from_string("lr = 0.1\n[[layer]]\ntype = \"relu\"\n", "g.toml"), ConfigError);
  EXPECT_THROW(graph_from_string("# nothing\n", "g.toml"), ConfigError);
}

}  // namespace
}  // namespace loom::nn
