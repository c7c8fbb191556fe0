// A model's layers as sizes, without a Model (no backend, no parameter buffers): what a
// performance model works from (perf/parallelism_model.h takes them as its ModelShape).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/nn/graph/model_spec.h"
#include "loom/nn/layers/layer.h"

namespace loom::nn {

struct LayerDescription {
  std::string name;         // the layer's stable name in the model
  std::string kind;         // Layer::kind(): "Linear", "Conv2d", "ReLU", ...
  int64_t in = 0, out = 0;  // elements per sample in and out
  int64_t flops = 0;        // Layer::flops_per_sample(): forward
  int64_t params = 0;
};

// The layers of the model of `spec` (model_zoo.h) in forward order, each built on its inputs'
// shapes; `in` counts the elements of all its inputs.
std::vector<LayerDescription> describe_layers(const ModelSpec& spec, const Shape& input_shape,
                                              int num_classes);

}  // namespace loom::nn
