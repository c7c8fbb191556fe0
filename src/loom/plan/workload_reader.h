// A run's config as the cost model's workload (perf/workload.h): the built-in MLP and CNN on
// Fashion-MNIST's shapes, at the config's batch.
#pragma once

#include <string>

#include "loom/core/config.h"
#include "loom/perf/workload.h"

namespace loom::plan {

// model = "mlp" (its mlp.hidden and mlp.dropout) or "cnn" (at its default shape). ConfigError
// naming the key for another model, or a CNN shape the count does not follow.
perf::Workload read_workload(const Config& cfg, const std::string& name = "config");

}  // namespace loom::plan
