// Which network a run trains, from its ModelSpec (model_spec.h), which the run plan reads from
// the config (plan/model_reader.h):
//   model = "mlp" (default) | "cnn"   built in, shaped by their parameters:
//     mlp.hidden  = [1024, 1024]  widths of the hidden layers (ReLU, then dropout)
//     mlp.dropout = 0.5
//     cnn.channels = [32, 64]     5x5 conv (pad 2) + ReLU + 2x2 max-pool per entry
//     cnn.hidden   = 1024         dense layer after the convolutions
//     cnn.dropout  = 0.5
//   model = "resnet20"            a graph file of the zoo, compiled in (configs/models/)
//   model = "path/net.toml"       a graph file: [[layer]] tables (graph_spec.h)
//   model = "path/net.onnx"       an ONNX file, with its weights (onnx_import.h)
//   [[layer]] tables in the run config itself, with no `model` key
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/core/config_value.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_spec.h"

namespace loom::nn {

std::vector<ConfigKeySpec> model_config_keys();

// Names `model` may take besides a file: "mlp", "cnn", then the compiled-in graph files.
std::vector<std::string> builtin_model_names();

// The graph `spec` describes (see the top of this file), built on the data's per-sample shape.
// Throws ConfigError naming the `model` key and its line for an unknown model or a CNN whose
// pooling stages shrink the image to nothing; InputError for a graph file that cannot be read.
GraphSpec model_graph(const ModelSpec& spec, const Shape& input_shape, int num_classes);

// The graph's nodes (model_graph + build_nodes).
std::vector<Node> build_model_nodes(const ModelSpec& spec, const Shape& input_shape,
                                    int num_classes);

// The layers of a model that is a chain (every layer reads the one before): the hook through
// which the sync layer swaps dense layers for model-parallel ones
// (sync/model_parallel_model.h). Throws ConfigError naming the first layer that branches.
std::vector<std::unique_ptr<Layer>> build_layers(const ModelSpec& spec, const Shape& input_shape,
                                                 int num_classes);

// The loss options applied to `model`.
void apply_loss_options(const LossOptions& o, Model& model);

// input_shape is per sample ({1, 28, 28} for Fashion-MNIST); an MLP flattens it first.
std::unique_ptr<Model> build_model(const ModelSpec& spec, Backend& backend,
                                   const Shape& input_shape, int num_classes);

}  // namespace loom::nn
