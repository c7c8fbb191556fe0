// A run's config as the cost model's workload (perf/workload.h): the built-in MLP and CNN on
// Fashion-MNIST's shapes, at the config's batch.
#pragma once

#include <string>

#include "loom/core/config.h"
#include "loom/nn/graph/model_spec.h"
#include "loom/perf/workload.h"

namespace loom::plan {

// model = "mlp" (its mlp.hidden and mlp.dropout) or "cnn" (at its default shape). ConfigError
// naming the key for another model, or a CNN shape the count does not follow.
perf::Workload read_workload(const Config& cfg, const std::string& name = "config");

// Whether read_workload counts `spec`'s model itself: the MLP, or the CNN at its default shape.
// Any other model is counted from its layers (experiments/workloads.h).
bool counts_own_workload(const nn::ModelSpec& spec);

}  // namespace loom::plan
