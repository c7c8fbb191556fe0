// The layer types a graph may name (`type = "conv2d"` in a [[layer]] table), each with the
// parameters it takes and how it is built from them and from the shapes of its inputs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/layers/layer.h"

namespace loom::nn {

struct LayerType {
  std::string type;   // as written in the graph: "conv2d"
  std::string takes;  // its parameters, for docs and errors: "out, kernel, stride, ..."
  std::string doc;    // one line
  std::function<std::unique_ptr<Layer>(LayerArgs& args, const std::vector<Shape>& inputs)> make;
};

const std::vector<LayerType>& layer_types();

// The layer for `spec`, built for `inputs` (its per-sample input shapes). Throws ConfigError
// naming the layer, its line and the problem for an unknown type or parameter, a bad value, or
// inputs it cannot take.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& name,
                                  const std::vector<Shape>& inputs);

}  // namespace loom::nn
