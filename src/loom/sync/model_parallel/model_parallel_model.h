// Builds the model for `parallel` (docs/model_parallel.md): plain data parallelism, model
// parallelism for every dense layer, or Krizhevsky's hybrid (convolutions data-parallel,
// dense layers model-parallel). Keys:
//
//   parallel (or parallel.mode)  "data" (default) | "model" | "hybrid"
//                   model:  the whole network works on the gathered batch of all workers;
//                           dense layers are split, other layers (convolutions) replicated.
//                   hybrid: layers before the first split dense layer run data-parallel on
//                           each worker's own samples; the rest as in "model".
//                   TOML cannot hold both `parallel = "x"` and `parallel.activations`, so
//                   files use parallel.mode; `--set parallel=model` works either way.
//   parallel.activations  "fp32" (default) | "int8": the activations and activation gradients
//                   exchanged between workers through the int8 dynamic-tree codec (error
//                   feedback off, parallel_exchange.h says why).
//   parallel.linear  per dense layer, in model order: "auto" | "column" | "row" |
//                   "replicated" | "data" (hybrid only, a leading run of layers kept
//                   data-parallel). Default: all "auto": consecutive dense layers pair up
//                   column -> row (one exchange each way per pair), a last unpaired one is
//                   replicated (the classifier: small).
//
// With one worker, or parallel = "data", this is nn::build_model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config_value.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_spec.h"

namespace loom::sync {

// The keys above, read by the run plan (plan/sync_reader.h).
struct ParallelOptions {
  std::string mode = "data";         // data | model | hybrid
  std::string where = "parallel";    // where the mode was set, for errors
  std::string activations = "fp32";  // fp32 | int8
  std::vector<std::string> linear;   // per nn::Linear, empty = all auto
};

std::vector<ConfigKeySpec> parallel_config_keys();

// The model of `spec` laid out for `opts`. init_seed: the seed that Model::init_params will be
// called with (the config's `seed`); the block's sublayers need it.
std::unique_ptr<nn::Model> build_model(const nn::ModelSpec& spec, const ParallelOptions& opts,
                                       uint64_t init_seed, comm::Communicator& comm,
                                       Backend& backend, const nn::Shape& input_shape,
                                       int num_classes);
// The same for any list of layers (tests).
std::unique_ptr<nn::Model> build_parallel_model(std::vector<std::unique_ptr<nn::Layer>> layers,
                                                const ParallelOptions& opts,
                                                comm::Communicator& comm, Backend& backend,
                                                const nn::Shape& input_shape, int num_classes,
                                                uint64_t init_seed);

// The layer of `model` that is a ModelParallelBlock, or -1.
int model_parallel_block_index(const nn::Model& model);

}  // namespace loom::sync
