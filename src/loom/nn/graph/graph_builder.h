// From a graph description (graph_spec.h) to the nodes of a Model: names every layer, resolves
// inputs, orders the layers so each comes after its inputs, builds each on its inputs' shapes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/layers/layer.h"

namespace loom::nn {

constexpr int kModelInput = -1;  // a node input that is the model's input, named "input"

struct Node {
  std::string name;  // unique in the model; "{type}_{k}" (k-th layer of that type) unless given
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;                     // node indices (earlier nodes) or kModelInput
  std::vector<float> init_params, init_state;  // LayerSpec's: empty, or the layer's sizes
  std::string source;  // the graph's file (GraphSpec::source): what the model's errors name
};

// The name a layer gets when the graph gives none.
std::string auto_layer_name(const std::string& type, int k);

// Nodes in an order where each follows its inputs (the file's order where it allows). Throws
// ConfigError naming the layer and the graph's file for a duplicate name, an input no layer
// defines, a cycle, more than one output (layers whose output nothing reads), and anything
// make_layer() or a layer's build refuses, such as mismatched shapes at an Add.
std::vector<Node> build_nodes(const GraphSpec& graph, const Shape& input_shape);
// The same, moving the layers' initial values out of `graph` rather than copying them (an
// imported network's weights are as large as its parameters).
std::vector<Node> build_nodes(GraphSpec&& graph, const Shape& input_shape);

// A chain of layers as nodes, each reading the one before: the zoo's built-in networks when
// their layers are made in code, and the model-parallel rewrite.
std::vector<Node> chain_nodes(std::vector<std::unique_ptr<Layer>> layers);

}  // namespace loom::nn
