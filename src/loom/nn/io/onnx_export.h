// A built model as an ONNX file for inference elsewhere (onnxruntime, TensorRT, ...): every
// layer becomes the ONNX nodes that compute what the layer computes in evaluation, its
// parameters and BatchNorm running statistics initializers named after the layer
// ("conv2d_0.weight", "batchnorm2d_0.running_mean"). The graph reads "input", [batch, the
// model's input shape] with a free batch axis, and writes "logits", [batch, the last layer's
// output shape]. docs/models.md ("ONNX export") lists each layer's nodes.
#pragma once

#include <cstdint>
#include <string>

#include "loom/nn/graph/model.h"

namespace loom::nn {

// The opset the export writes: the ONNX release Debian ships (1.12) checks opsets up to 17,
// and loom's importer reads 11 to 17; 13 is the oldest with every op below in its current form
// (Dropout's ratio as an input, Gemm, Flatten and Concat with negative axes).
inline constexpr int64_t kOnnxExportOpset = 13;

struct OnnxExportOptions {
  std::string doc;  // the model's doc_string ("trained by loom run runs/mlp-3"); empty: none
  // The batch axis: 0 leaves it free ("batch"); n > 0 fixes it at n, for runtimes that want
  // static shapes.
  int64_t batch = 0;
  // Parameters and state over this many bytes go to a file beside the model (protobuf
  // serializes at most 2 GB).
  int64_t inline_bytes = int64_t(1) << 30;
};

// The ONNX model as serialized bytes. params: model.num_params() floats in the model's order
// (Model::params()), state: model.num_state() floats (Model::state()), both in host memory (a
// model on a GPU copies them out first); state may be null when the model has none. The model
// is checked by ONNX's checker and by its strict shape inference, and the inferred output shape
// must be the model's, before the bytes are returned. Throws ConfigError naming the layer for a
// layer type the export has no ONNX form for (model-parallel layers), or without libonnx-dev.
std::string onnx_model_bytes(const Model& model, const float* params, const float* state,
                             const OnnxExportOptions& options = {});

// Protobuf serializes at most 2 GB: a model whose parameters and state pass
// OnnxExportOptions::inline_bytes keeps its tensors in a file beside the .onnx file (ONNX
// external data).
bool onnx_needs_external_data(const Model& model, const OnnxExportOptions& options = {});
// That file: `path` + ".data", named in the model relative to its folder.
std::string onnx_external_data_path(const std::string& path);

// The checked model written to `path` atomically: a temporary file in the same folder, renamed
// over `path` once complete; on failure `path` is untouched and InputError names it. A model
// that onnx_needs_external_data writes onnx_external_data_path(path) first, the same way.
void export_onnx(const Model& model, const float* params, const float* state,
                 const std::string& path, const OnnxExportOptions& options = {});

// False when this loom was built without libonnx-dev; the calls above then throw.
bool onnx_export_built();

}  // namespace loom::nn
