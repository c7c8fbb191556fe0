// A model graph from an ONNX file (`model = "net.onnx"`): the file's nodes become loom layers
// (graph_spec.h) and its initializers their initial parameters and BatchNorm statistics, so a
// network exported by torch.onnx.export trains on from PyTorch's weights. docs/models.md lists
// the ONNX ops loom reads and how each maps to a layer.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/layers/layer.h"

namespace loom::nn {

// input_shape: the data's per-sample shape, which the file's input must have after its batch
// axis. Throws InputError for a file that cannot be read or is not a well-formed ONNX model
// (bad bytes, an input nothing defines, initializer data that does not fill its shape) and
// ConfigError for one loom cannot run (an IR version or opset it does not know, an op it has
// no layer for, an input shape other than the data's); each message names the file, and the
// node and its op type where one is at fault.
GraphSpec graph_from_onnx(const std::string& path, const Shape& input_shape);
// The same from the file's bytes; name stands for the file in messages.
GraphSpec graph_from_onnx_bytes(const void* data, size_t size, const std::string& name,
                                const Shape& input_shape);

// False when this loom was built without libonnx-dev; graph_from_onnx then always throws.
bool onnx_import_built();

// The op types graph_from_onnx reads, for docs and errors.
const std::vector<std::string>& onnx_ops();

}  // namespace loom::nn
