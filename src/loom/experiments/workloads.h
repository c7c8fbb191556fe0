// The performance model's workload for a name `loom scale -w` and `loom advise -m` take (and the
// Python package's loom.scale and loom.advise): a reference workload, or a loom model config
// described from its layers. It sits here, above both perf and nn: perf runs nothing and knows
// no layer, nn knows no cost model.
#pragma once

#include <string>

#include "loom/perf/workload.h"

namespace loom::experiments {

// The workload `name` names: a reference workload, or a loom config (.toml). A config of the
// built-in MLP, or of the CNN at its default shape, on data of Fashion-MNIST's shape takes the
// performance model's validated description of them (plan::read_workload); any other model
// graph (another `model` or CNN shape, [[layer]] tables, a graph file) or other data is
// described from its layers on the config's own data (its sample shape and outputs,
// train::read_data_shape), which must then be readable.
perf::Workload resolve_workload(const std::string& name);

}  // namespace loom::experiments
