#include "loom/experiments/workloads.h"

#include "loom/core/config.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model_description.h"

namespace loom::experiments {

perf::Workload resolve_workload(const std::string& name) {
  const size_t n = name.size();
  if (n <= 5 || name.substr(n - 5) != ".toml") return perf::reference_workload(name);
  const Config cfg = Config::from_file(name);
  const std::string model = cfg.get_string("model", "mlp");
  const bool inline_graph = !nn::graph_from_config(cfg).layers.empty();
  if (!inline_graph && (model == "mlp" || model == "cnn"))
    return perf::workload_from_config(cfg, name);
  std::vector<perf::GraphLayer> layers;
  for (const nn::LayerDescription& d : nn::describe_layers(cfg, {1, 28, 28}, 10))
    layers.push_back(
        {d.name, d.kind, double(d.in), double(d.out), double(d.params), double(d.flops)});
  const int64_t batch =
      cfg.get_int(cfg.has("batch") ? "batch" : "train.batch", 128, 1, int64_t{1} << 30);
  return perf::workload_from_graph(name, layers, 28 * 28 + 1, batch);
}

}  // namespace loom::experiments
