#include "loom/nn/graph/model_zoo.h"

#include <limits>

#include "loom/core/error.h"
#include "loom/nn/io/onnx_import.h"

namespace loom::nn {

extern const char* const kBuiltinResnet20Toml;
extern const char* const kBuiltinGptCharToml;

namespace {

struct BuiltinGraph {
  const char* name;
  const char* const* text;
};

const BuiltinGraph kBuiltinGraphs[] = {
    {"resnet20", &kBuiltinResnet20Toml},
    {"gpt-char", &kBuiltinGptCharToml},
};

ConfigValue value(ConfigScalar v, const std::string& where) {
  ConfigValue c;
  c.value = std::move(v);
  c.where = where;
  return c;
}

// Appends a layer of the built-in graph; params as {key, value}.
void add(GraphSpec& g, const std::string& type,
         std::initializer_list<std::pair<const char*, ConfigValue>> params = {}) {
  LayerSpec l;
  l.type = type;
  l.where = g.source;
  for (const auto& [k, v] : params) l.params[k] = v;
  g.layers.push_back(std::move(l));
}

GraphSpec mlp_graph(const MlpOptions& o, int num_classes) {
  const double p = o.dropout;
  GraphSpec g;
  g.source = "built-in mlp";
  const std::string w = o.hidden_where.empty() ? g.source : o.hidden_where;
  add(g, "flatten");
  for (int64_t h : o.hidden) {
    add(g, "linear", {{"out", value(int64_t{h}, w)}});
    add(g, "relu");
    if (p > 0) add(g, "dropout", {{"p", value(p, w)}});
  }
  add(g, "linear", {{"out", value(int64_t{num_classes}, g.source)}});
  return g;
}

GraphSpec cnn_graph(const CnnOptions& o, const Shape& input_shape, int num_classes) {
  if (input_shape.size() != 3)
    throw ConfigError(fmt::format("model \"cnn\" needs images [C, H, W], the data has {}",
                                  shape_text(input_shape)));
  const std::vector<int64_t>& channels = o.channels;
  const int64_t hidden = o.hidden;
  const double p = o.dropout;
  GraphSpec g;
  g.source = "built-in cnn";
  int64_t h = input_shape[1], w = input_shape[2];
  for (int64_t out : channels) {
    add(g, "conv2d",
        {{"out", value(int64_t{out}, g.source)},
         {"kernel", value(int64_t{5}, g.source)},
         {"padding", value(int64_t{2}, g.source)}});
    add(g, "relu");
    add(g, "maxpool2d", {{"kernel", value(int64_t{2}, g.source)}});
    h /= 2;
    w /= 2;
    if (h < 1 || w < 1)
      throw ConfigError(
          fmt::format("{}: key 'cnn.channels': {} pooling stages shrink a {} "
                      "image to nothing",
                      o.channels_where, channels.size(), shape_text(input_shape)));
  }
  add(g, "flatten");
  add(g, "linear", {{"out", value(int64_t{hidden}, g.source)}});
  add(g, "relu");
  if (p > 0) add(g, "dropout", {{"p", value(p, g.source)}});
  add(g, "linear", {{"out", value(int64_t{num_classes}, g.source)}});
  return g;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<ConfigKeySpec> model_config_keys() {
  return {
      {"model", ConfigType::kString, "\"mlp\"",
       "\"mlp\", \"cnn\", a graph of the zoo (`loom models list`), a graph file (.toml) "
       "or an ONNX file (.onnx)"},
      {"layer.", ConfigType::kArray, "", "[[layer]] tables: the model graph inline"},
      {"loss.type", ConfigType::kString, "\"cross_entropy\"",
       "\"cross_entropy\" (class labels) or \"mse\" (float targets: regression shards)"},
      {"loss.label_smoothing", ConfigType::kDouble, "0",
       "cross-entropy target (1 - eps) onehot + eps / classes, as PyTorch's label_smoothing"},
      {"loss.ignore_index", ConfigType::kInt, "none",
       "labels equal to this add no loss and no gradient (padding positions of a sequence)"},
      {"mlp.hidden", ConfigType::kArray, "[1024, 1024]", "widths of the MLP's hidden layers"},
      {"mlp.dropout", ConfigType::kDouble, "0.5", "dropout after each hidden ReLU (0 = none)"},
      {"cnn.channels", ConfigType::kArray, "[32, 64]", "channels of each 5x5 conv + 2x2 pool"},
      {"cnn.hidden", ConfigType::kInt, "1024", "width of the CNN's dense layer"},
      {"cnn.dropout", ConfigType::kDouble, "0.5", "dropout after the dense layer"},
  };
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names = {"mlp", "cnn"};
  for (const auto& b : kBuiltinGraphs) names.push_back(b.name);
  return names;
}

GraphSpec model_graph(const ModelSpec& spec, const Shape& input_shape, int num_classes) {
  if (!spec.inline_graph.layers.empty()) return spec.inline_graph;
  const std::string& model = spec.model;
  if (model == "mlp") return mlp_graph(spec.mlp, num_classes);
  if (model == "cnn") return cnn_graph(spec.cnn, input_shape, num_classes);
  for (const auto& b : kBuiltinGraphs)
    if (model == b.name) return graph_from_string(*b.text, std::string("built-in ") + b.name);
  if (ends_with(model, ".toml")) return graph_from_file(model);
  if (ends_with(model, ".onnx")) return graph_from_onnx(model, input_shape);
  std::string names;
  for (const auto& n : builtin_model_names()) names += (names.empty() ? "\"" : "\", \"") + n;
  throw ConfigError(
      fmt::format("{}: key 'model': \"{}\" is neither a model of the zoo ({}\") "
                  "nor a graph file (.toml, .onnx)",
                  spec.where, model, names));
}

std::vector<Node> build_model_nodes(const ModelSpec& spec, const Shape& input_shape,
                                    int num_classes) {
  return build_nodes(model_graph(spec, input_shape, num_classes), input_shape);
}

std::vector<std::unique_ptr<Layer>> build_layers(const ModelSpec& spec, const Shape& input_shape,
                                                 int num_classes) {
  std::vector<std::unique_ptr<Layer>> layers;
  auto nodes = build_model_nodes(spec, input_shape, num_classes);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int expect = i == 0 ? kModelInput : int(i) - 1;
    if (nodes[i].inputs.size() != 1 || nodes[i].inputs[0] != expect)
      throw ConfigError(
          fmt::format("layer '{}' does not read the layer before it: the model is "
                      "a graph, not a chain, and model parallelism splits chains "
                      "only (use parallel = \"data\")",
                      nodes[i].name));
    // The chain is handed over as bare layers, which hold no initial weights.
    if (!nodes[i].init_params.empty() || !nodes[i].init_state.empty())
      throw ConfigError(
          fmt::format("layer '{}' comes with the weights of an imported model, "
                      "which model parallelism does not carry over (use "
                      "parallel = \"data\")",
                      nodes[i].name));
    layers.push_back(std::move(nodes[i].layer));
  }
  return layers;
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, Backend& backend,
                                   const Shape& input_shape, int num_classes) {
  auto model = std::make_unique<Model>(backend, input_shape, num_classes,
                                       build_model_nodes(spec, input_shape, num_classes));
  apply_loss_options(spec.loss, *model);
  return model;
}

void apply_loss_options(const LossOptions& o, Model& model) {
  model.set_label_smoothing(o.label_smoothing);
  model.set_loss_kind(o.kind);
  if (o.ignore_index) model.set_ignore_index(*o.ignore_index);
}

}  // namespace loom::nn
