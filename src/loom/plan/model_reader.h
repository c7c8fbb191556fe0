// The model keys of a run's config read into nn::ModelSpec (nn/graph/model_spec.h): `model` or
// the config's own [[layer]] tables, the built-in networks' mlp.* and cnn.* keys, and loss.*.
// The keys of a network other than the one chosen are refused by name.
#pragma once

#include "loom/core/config.h"
#include "loom/nn/graph/model_spec.h"

namespace loom::plan {

// ConfigError naming the key and its line for both `model` and [[layer]] tables, a width or
// dropout out of range, or another network's key set away from its default.
nn::ModelSpec read_model_spec(const Config& cfg);

// loss.type ("cross_entropy" | "mse"), loss.label_smoothing, loss.ignore_index: ConfigError
// naming the key for an unknown type, or a cross-entropy option with "mse".
nn::LossOptions read_loss_options(const Config& cfg);

}  // namespace loom::plan
