// A trained model as one safetensors file (safetensors.h; docs/formats.md, "Model weights"):
// one F32 tensor per parameter and state tensor of each layer, named "<layer>.<tensor>"
// (Layer::param_tensors, state_tensors: "conv2d_0.weight", "batchnorm2d_0.running_mean"), layer
// by layer in the model's order, so the file's data is the flat parameter buffer and the flat
// state buffer interleaved layer by layer, bit for bit. Its metadata makes the file
// self-contained:
//   format          "loom.model"
//   format_version  "1" (kModelFileVersion)
//   graph           the model graph as [[layer]] TOML (graph_to_toml)
//   input_shape     the per-sample input shape as a JSON array ("[1, 28, 28]")
//   num_classes     "10"
// and whatever the writer adds (train adds the run's steps and input normalisation).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/io/safetensors.h"

namespace loom::nn {

inline constexpr int64_t kModelFileVersion = 1;
inline constexpr const char* kModelFileName = "model.safetensors";
// train.keep_best: the weights of the epoch with the best validation figure.
inline constexpr const char* kBestModelFileName = "model.best.safetensors";

// One named tensor of a model: a piece of its flat parameter buffer (state = false) or of its
// flat state buffer (state = true).
struct ModelTensor {
  std::string name;  // "<layer>.<tensor>"
  Shape shape;
  bool state = false;
  int64_t offset = 0, count = 0;
};

// The model's tensors, layer by layer in model order, each layer's parameters then its state.
// Within each buffer they are in flat order and cover it without a gap.
std::vector<ModelTensor> model_tensors(const Model& model);

// The file's bytes for `params` and `state` (host copies, model.num_params() and
// model.num_state() floats) laid out as `model`'s tensors, with `graph` (the graph `model` was
// built from) and `extra` in the metadata.
std::vector<uint8_t> model_file_bytes(const Model& model, const GraphSpec& graph,
                                      std::span<const float> params, std::span<const float> state,
                                      const std::map<std::string, std::string>& extra = {});

// A model file read back: the file, and its metadata's graph, input shape and classes.
struct ModelFile {
  SafetensorsFile file;
  GraphSpec graph;
  Shape input_shape;
  int num_classes = 0;
};

// Reads a model file. InputError naming the file for anything SafetensorsFile refuses, for
// metadata without "format_version" or of a newer version than kModelFileVersion, or without a
// readable graph, input_shape or num_classes.
ModelFile read_model_file(const std::string& path);

// The file's graph built on its input shape, holding the file's weights and state.
// InputError naming the file for a graph that does not build or tensors that do not match it.
std::unique_ptr<Model> build_model_from_file(const ModelFile& f, Backend& backend);

// Copies `file`'s tensors into `model`'s parameters and state. InputError naming the file and
// the tensor when one of model_tensors(model) is missing, has another shape or is not F32, or
// when the file holds a tensor the model does not have.
void load_model_tensors(Model& model, const SafetensorsFile& file);

}  // namespace loom::nn
