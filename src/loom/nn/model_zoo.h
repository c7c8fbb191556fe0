// Named models built from config keys:
//   model = "mlp" (default) | "cnn"
//   mlp.hidden  = [1024, 1024]  widths of the hidden layers (ReLU, then dropout)
//   mlp.dropout = 0.5
//   cnn.channels = [32, 64]     5x5 conv (pad 2) + ReLU + 2x2 max-pool per entry
//   cnn.hidden   = 1024         dense layer after the convolutions
//   cnn.dropout  = 0.5
#pragma once

#include <memory>
#include <vector>

#include "loom/core/config.h"
#include "loom/nn/model.h"

namespace loom::nn {

std::vector<ConfigKeySpec> model_config_keys();

// The zoo model's layers, before a Model owns them: the hook through which the sync layer
// swaps dense layers for model-parallel ones (sync/model_parallel_model.h).
std::vector<std::unique_ptr<Layer>> build_layers(const Config& cfg, const Shape& input_shape,
                                                 int num_classes);

// input_shape is per sample ({1, 28, 28} for Fashion-MNIST); an MLP flattens it first.
std::unique_ptr<Model> build_model(const Config& cfg, Backend& backend, const Shape& input_shape,
                                   int num_classes);

}  // namespace loom::nn
