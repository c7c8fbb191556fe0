// Which network a run trains and how its loss is taken, as the run plan reads them from the
// config (plan/model_reader.h); model_zoo.h builds the graph from it once the data's shape is
// known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"

namespace loom::nn {

// model = "mlp": mlp.hidden, mlp.dropout.
struct MlpOptions {
  std::vector<int64_t> hidden = {1024, 1024};
  double dropout = 0.5;
  std::string hidden_where;  // where mlp.hidden was set; empty: the default
};

// model = "cnn": cnn.channels, cnn.hidden, cnn.dropout.
struct CnnOptions {
  std::vector<int64_t> channels = {32, 64};
  int64_t hidden = 1024;
  double dropout = 0.5;
  std::string channels_where = "cnn.channels";  // for the error of too many pooling stages
};

// loss.type, loss.label_smoothing, loss.ignore_index.
struct LossOptions {
  LossKind kind = LossKind::kCrossEntropy;
  std::string where = "loss.type";  // where loss.type was set, for errors
  float label_smoothing = 0.0f;
  std::optional<int32_t> ignore_index;
};

struct ModelSpec {
  // [[layer]] tables of the run config itself; when it has layers, it is the model.
  GraphSpec inline_graph;
  // Otherwise `model`: "mlp", "cnn", a graph of the zoo, a graph file (.toml) or an ONNX file.
  std::string model = "mlp";
  std::string where = "model";  // where `model` was set, for errors
  MlpOptions mlp;
  CnnOptions cnn;
  LossOptions loss;
};

}  // namespace loom::nn
