#include "loom/sync/model_parallel/model_parallel_model.h"

#include "loom/compress/int8_codec.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/linear.h"
#include "loom/sync/model_parallel/model_parallel_block.h"
#include "loom/sync/model_parallel/parallel_linear.h"

namespace loom::sync {

std::vector<ConfigKeySpec> parallel_config_keys() {
  return {
      {"parallel", ConfigType::kString, "\"data\"",
       "\"data\", \"model\" (dense layers split) or \"hybrid\" (conv data-, dense "
       "model-parallel)"},
      {"parallel.mode", ConfigType::kString, "\"data\"", "the same as `parallel`, for TOML files"},
      {"parallel.activations", ConfigType::kString, "\"fp32\"",
       "\"fp32\" or \"int8\": activations exchanged by model-parallel layers"},
      {"parallel.linear", ConfigType::kArray, "[\"auto\", ...]",
       "per dense layer: auto, column, row, replicated, data (hybrid)"},
  };
}

namespace {

bool elementwise(const nn::Layer& l) {
  return dynamic_cast<const nn::ReLU*>(&l) || dynamic_cast<const nn::Dropout*>(&l);
}

std::string layer_name(int i, const nn::Layer& l) {
  return fmt::format("layer {} {}", i, l.describe());
}

}  // namespace

int model_parallel_block_index(const nn::Model& model) {
  for (size_t i = 0; i < model.layers().size(); ++i)
    if (dynamic_cast<const ModelParallelBlock*>(model.layers()[i].get())) return int(i);
  return -1;
}

namespace {

// The chain `layers` laid out for `opts` (model or hybrid): the layers before the first split
// dense layer as they are, then one ModelParallelBlock. first_index: the index of the chain's
// first layer in the whole model, which the block's sublayers keep (their initial weights and
// dropout streams are drawn by it). params_before: layers before the chain have parameters.
std::vector<std::unique_ptr<nn::Layer>> parallel_chain(
    std::vector<std::unique_ptr<nn::Layer>> layers, const ParallelOptions& opts,
    comm::Communicator& comm, uint64_t init_seed, int first_index, bool params_before_chain) {
  // Roles of the dense layers.
  std::vector<int> dense;
  for (size_t i = 0; i < layers.size(); ++i)
    if (dynamic_cast<nn::Linear*>(layers[i].get())) dense.push_back(int(i));
  if (dense.empty())
    throw ConfigError(
        fmt::format("parallel = \"{}\": the model has no dense layer to split", opts.mode));
  if (!opts.linear.empty() && opts.linear.size() != dense.size())
    throw ConfigError(
        fmt::format("key 'parallel.linear': {} entries for the model's {} dense "
                    "layers",
                    opts.linear.size(), dense.size()));
  std::vector<std::string> role(dense.size(), "auto");
  if (!opts.linear.empty()) role = opts.linear;
  size_t first_mp = 0;
  while (first_mp < role.size() && role[first_mp] == "data") ++first_mp;
  for (size_t k = first_mp; k < role.size(); ++k)
    if (role[k] == "data")
      throw ConfigError(
          fmt::format("key 'parallel.linear': entry {} is \"data\" after a model-"
                      "parallel dense layer; only a leading run can stay "
                      "data-parallel",
                      k));
  if (first_mp > 0 && opts.mode != "hybrid")
    throw ConfigError("key 'parallel.linear': \"data\" entries need parallel = \"hybrid\"");
  if (first_mp == role.size())
    throw ConfigError(
        "key 'parallel.linear': every dense layer is \"data\"; use parallel = "
        "\"data\"");
  for (size_t k = first_mp; k < role.size(); ++k) {  // auto: pair column -> row
    if (role[k] != "auto") continue;
    const bool prev_col = k > first_mp && role[k - 1] == "column";
    const bool can_pair = prev_col && [&] {
      for (int i = dense[k - 1] + 1; i < dense[k]; ++i)
        if (!elementwise(*layers[size_t(i)])) return false;
      return true;
    }();
    if (can_pair)
      role[k] = "row";
    else if (k + 1 < role.size())
      role[k] = "column";
    else
      role[k] = "replicated";
  }

  const int start = opts.mode == "model" ? 0 : dense[first_mp];
  bool params_before = params_before_chain;
  for (int i = 0; i < start; ++i) params_before = params_before || layers[size_t(i)]->num_params();

  std::shared_ptr<compress::Codec> codec;
  if (opts.activations == "int8") codec = std::make_shared<compress::Int8Codec>();
  auto ex = std::make_shared<ActivationExchange>(comm, codec);

  // Sublayers: walk the layers from `start`, tracking whether the features are a shard.
  std::vector<BlockSublayer> sub;
  bool sharded = false;
  int64_t shard_first = 0, shard_cols = 0, full_features = 0;
  bool partial_input = false, seen_params = false;
  int64_t features = -1;  // -1: whole rows, the dropout learns the width when built
  size_t k = 0;
  while (k < dense.size() && dense[k] < start) ++k;
  for (int i = start; i < int(layers.size()); ++i) {
    nn::Layer& l = *layers[size_t(i)];
    auto* lin = dynamic_cast<nn::Linear*>(&l);
    if (lin) {
      const std::string& r = role[k];
      const bool next_is_row = k + 1 < role.size() && role[k + 1] == "row";
      const std::string name = layer_name(first_index + i, l);
      if (r == "row" && !sharded)
        throw ConfigError(
            fmt::format("key 'parallel.linear': {} is row-parallel but does not "
                        "follow a column-parallel layer (through ReLU/Dropout "
                        "only)",
                        name));
      if (r != "row" && sharded)
        throw ConfigError(
            fmt::format("key 'parallel.linear': {} follows a column-parallel "
                        "layer that was not gathered; make it \"row\"",
                        name));
      if (r == "column") {
        const bool reduce_self = seen_params;  // else the block's reduce-scatter sums dx
        if (!seen_params) partial_input = true;
        auto col = std::make_unique<ColumnParallelLinear>(lin->in_features(), lin->out_features(),
                                                          *ex, /*gather_output=*/!next_is_row,
                                                          reduce_self, name);
        if (next_is_row) {
          sharded = true;
          shard_first = col->first_col();
          shard_cols = col->local_cols();
          full_features = lin->out_features();
        }
        sub.push_back({std::move(col), first_index + i});
      } else if (r == "row") {
        sub.push_back({std::make_unique<RowParallelLinear>(lin->in_features(), lin->out_features(),
                                                           *ex, name),
                       first_index + i});
        sharded = false;
      } else {  // replicated: the single-worker layer itself
        sub.push_back({std::move(layers[size_t(i)]), first_index + i});
      }
      seen_params = true;
      features = lin->out_features();
      ++k;
      continue;
    }
    if (auto* drop = dynamic_cast<nn::Dropout*>(&l)) {
      sub.push_back({std::make_unique<ParallelDropout>(
                         drop->p(), first_index + i, sharded ? full_features : features,
                         sharded ? shard_first : 0, sharded ? shard_cols : -1, *ex),
                     first_index + i});
      continue;
    }
    if (sharded && !elementwise(l))
      throw ConfigError(
          fmt::format("parallel: {} sits between a column- and a row-parallel "
                      "dense layer; only ReLU and Dropout can work on a shard",
                      layer_name(first_index + i, l)));
    seen_params = seen_params || l.num_params() > 0;
    features = -1;
    sub.push_back({std::move(layers[size_t(i)]), first_index + i});
  }
  if (sharded)
    throw ConfigError(
        "parallel: the last dense layer is column-parallel without a row-parallel "
        "partner and was not gathered");

  std::vector<std::unique_ptr<nn::Layer>> out;
  for (int i = 0; i < start; ++i) out.push_back(std::move(layers[size_t(i)]));
  out.push_back(std::make_unique<ModelParallelBlock>(ex, std::move(sub), init_seed, params_before,
                                                     partial_input));
  return out;
}

}  // namespace

std::unique_ptr<nn::Model> build_parallel_model(std::vector<std::unique_ptr<nn::Layer>> layers,
                                                const ParallelOptions& opts,
                                                comm::Communicator& comm, Backend& backend,
                                                const nn::Shape& input_shape, int num_classes,
                                                uint64_t init_seed) {
  if (opts.mode == "data" || comm.size() == 1)
    return std::make_unique<nn::Model>(backend, input_shape, num_classes, std::move(layers));
  return std::make_unique<nn::Model>(
      backend, input_shape, num_classes,
      parallel_chain(std::move(layers), opts, comm, init_seed, 0, false));
}

std::unique_ptr<nn::Model> build_model(const nn::ModelSpec& spec, const ParallelOptions& opts,
                                       uint64_t seed, comm::Communicator& comm, Backend& backend,
                                       const nn::Shape& input_shape, int num_classes) {
  // Data parallelism keeps the model whole: a graph stays a graph, and an imported model keeps
  // its weights.
  if (opts.mode == "data" || comm.size() == 1)
    return nn::build_model(spec, backend, input_shape, num_classes);
  std::vector<nn::Node> nodes = nn::build_model_nodes(spec, input_shape, num_classes);
  // The chain at the end of the graph: from `tail` on, each layer reads the one before it.
  int tail = int(nodes.size());
  while (tail > 0 && nodes[size_t(tail - 1)].inputs == std::vector<int>{tail - 2}) --tail;
  for (size_t i = size_t(tail); i < nodes.size(); ++i)
    if (!nodes[i].init_params.empty() || !nodes[i].init_state.empty())
      throw ConfigError(
          fmt::format("layer '{}' comes with the weights of an imported model, "
                      "which model parallelism does not carry over (use parallel "
                      "= \"data\")",
                      nodes[i].name));
  if (tail > 0 && opts.mode != "hybrid")
    throw ConfigError(fmt::format(
        "parallel = \"{}\" runs every layer on the gathered batch, which needs a chain of "
        "layers; layer '{}' joins branches of the graph: use parallel = \"hybrid\" (the graph "
        "data-parallel up to the dense layers at its end) or \"data\"",
        opts.mode, nodes[size_t(tail - 1)].name));
  // Hybrid on a graph: the layers up to the chain stay a data-parallel graph; the chain is laid
  // out as for a chain model, its sublayers keeping their indices in the whole model.
  bool params_before = false;
  std::vector<std::unique_ptr<nn::Layer>> chain;
  std::vector<std::string> chain_names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (int(i) < tail) {
      params_before = params_before || nodes[i].layer->num_params() > 0;
      continue;
    }
    chain.push_back(std::move(nodes[i].layer));
    chain_names.push_back(nodes[i].name);
  }
  std::vector<std::unique_ptr<nn::Layer>> laid_out =
      parallel_chain(std::move(chain), opts, comm, seed, tail, params_before);
  nodes.resize(size_t(tail));
  for (size_t k = 0; k < laid_out.size(); ++k) {
    nn::Node node;
    node.name = k + 1 < laid_out.size() ? chain_names[k] : "model_parallel";
    node.layer = std::move(laid_out[k]);
    node.inputs = {tail + int(k) - 1};  // kModelInput (-1) for a chain from the input
    nodes.push_back(std::move(node));
  }
  auto model = std::make_unique<nn::Model>(backend, input_shape, num_classes, std::move(nodes));
  nn::apply_loss_options(spec.loss, *model);
  return model;
}

}  // namespace loom::sync
