#include "loom/nn/graph/graph_builder.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "loom/core/error.h"
#include "loom/nn/layers/layer_factory.h"

namespace loom::nn {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "file.toml:12: layer 'conv2d_3' (conv2d)", the prefix of every error about one layer.
std::string layer_where(const GraphSpec& g, const LayerSpec& l, const std::string& name) {
  return fmt::format("{}: layer '{}' ({})", l.where.empty() ? g.source : l.where, name, l.type);
}

}  // namespace

std::string auto_layer_name(const std::string& type, int k) {
  return fmt::format("{}_{}", lower(type), k);
}

namespace {

// build_nodes, taking the initial values from `take` (the graph itself) where not null.
std::vector<Node> nodes_of(const GraphSpec& graph, const Shape& input_shape, GraphSpec* take) {
  const int n = int(graph.layers.size());
  if (n == 0) throw ConfigError(fmt::format("{}: the model has no layers", graph.source));

  // Names: given, or the k-th layer of its type.
  std::vector<std::string> names(static_cast<size_t>(n));
  std::map<std::string, int> count, index;
  for (int i = 0; i < n; ++i) {
    const LayerSpec& l = graph.layers[size_t(i)];
    const int k = count[l.type]++;
    names[size_t(i)] = l.name.empty() ? auto_layer_name(l.type, k) : l.name;
  }
  for (int i = 0; i < n; ++i) {
    const std::string& name = names[size_t(i)];
    const LayerSpec& l = graph.layers[size_t(i)];
    if (name == "input")
      throw ConfigError(fmt::format("{}: the name 'input' is the model's input; pick another",
                                    layer_where(graph, l, name)));
    if (!index.emplace(name, i).second)
      throw ConfigError(fmt::format("{}: the name is taken by layer {} of the graph",
                                    layer_where(graph, l, name), index[name]));
  }

  // Inputs, as indices into graph.layers.
  std::vector<std::vector<int>> inputs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const LayerSpec& l = graph.layers[size_t(i)];
    if (l.inputs.empty()) {
      inputs[size_t(i)].push_back(i == 0 ? kModelInput : i - 1);
      continue;
    }
    for (const std::string& in : l.inputs) {
      if (in == "input") {
        inputs[size_t(i)].push_back(kModelInput);
        continue;
      }
      auto it = index.find(in);
      if (it == index.end())
        throw ConfigError(fmt::format("{}: input '{}' is not a layer of the graph (nor 'input')",
                                      layer_where(graph, l, names[size_t(i)]), in));
      inputs[size_t(i)].push_back(it->second);
    }
  }

  // Order: repeatedly take the first layer in file order whose inputs are all placed.
  std::vector<int> order, position(static_cast<size_t>(n), -1);
  while (int(order.size()) < n) {
    int next = -1;
    for (int i = 0; i < n && next < 0; ++i) {
      if (position[size_t(i)] >= 0) continue;
      bool ready = true;
      for (int j : inputs[size_t(i)])
        ready = ready && (j == kModelInput || position[size_t(j)] >= 0);
      if (ready) next = i;
    }
    if (next < 0) {
      std::string stuck;
      for (int i = 0; i < n; ++i)
        if (position[size_t(i)] < 0)
          stuck += (stuck.empty() ? "'" : ", '") + names[size_t(i)] + "'";
      throw ConfigError(fmt::format("{}: the graph has a cycle: layers {}' each wait on another",
                                    graph.source, stuck));
    }
    position[size_t(next)] = int(order.size());
    order.push_back(next);
  }

  // One output: every layer but one must feed another.
  std::vector<bool> read(static_cast<size_t>(n), false);
  for (int i = 0; i < n; ++i)
    for (int j : inputs[size_t(i)])
      if (j != kModelInput) read[size_t(j)] = true;
  std::vector<std::string> outputs;
  for (int i : order)
    if (!read[size_t(i)]) outputs.push_back(names[size_t(i)]);
  if (outputs.size() > 1)
    throw ConfigError(
        fmt::format("{}: the graph has {} outputs ({}); nothing reads all but one "
                    "of them, and a model has one output",
                    graph.source, outputs.size(), fmt::join(outputs, ", ")));

  // Build in order, each on its inputs' shapes.
  std::vector<Node> nodes;
  std::vector<Shape> shape_of(static_cast<size_t>(n));
  for (int i : order) {
    const LayerSpec& l = graph.layers[size_t(i)];
    Node node;
    node.name = names[size_t(i)];
    node.source = graph.source;
    if (take) {
      node.init_params = std::move(take->layers[size_t(i)].init_params);
      node.init_state = std::move(take->layers[size_t(i)].init_state);
    } else {
      node.init_params = l.init_params;
      node.init_state = l.init_state;
    }
    std::vector<Shape> in_shapes;
    for (int j : inputs[size_t(i)]) {
      node.inputs.push_back(j == kModelInput ? kModelInput : position[size_t(j)]);
      in_shapes.push_back(j == kModelInput ? input_shape : shape_of[size_t(j)]);
    }
    const std::string where = layer_where(graph, l, node.name);
    try {
      node.layer = make_layer(l, node.name, in_shapes);
      shape_of[size_t(i)] = node.layer->build_inputs(in_shapes);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      if (what.find("layer '" + node.name + "'") != std::string::npos) throw;
      std::string shapes;
      for (const Shape& s : in_shapes) shapes += (shapes.empty() ? "" : ", ") + shape_text(s);
      throw ConfigError(fmt::format("{} on input {}: {}", where, shapes, what));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace

std::vector<Node> build_nodes(const GraphSpec& graph, const Shape& input_shape) {
  return nodes_of(graph, input_shape, nullptr);
}

std::vector<Node> build_nodes(GraphSpec&& graph, const Shape& input_shape) {
  return nodes_of(graph, input_shape, &graph);
}

std::vector<Node> chain_nodes(std::vector<std::unique_ptr<Layer>> layers) {
  std::vector<Node> nodes;
  std::map<std::string, int> count;
  for (size_t i = 0; i < layers.size(); ++i) {
    Node node;
    const std::string kind = layers[i]->kind();
    node.name = auto_layer_name(kind, count[lower(kind)]++);
    node.layer = std::move(layers[i]);
    node.inputs.push_back(i == 0 ? kModelInput : int(i) - 1);
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace loom::nn
