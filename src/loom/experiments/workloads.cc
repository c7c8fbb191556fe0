#include "loom/experiments/workloads.h"

#include "loom/core/config.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model_description.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/workload_reader.h"

namespace loom::experiments {

perf::Workload resolve_workload(const std::string& name) {
  const size_t n = name.size();
  if (n <= 5 || name.substr(n - 5) != ".toml") return perf::reference_workload(name);
  const Config cfg = Config::from_file(name);
  const std::string model = cfg.get_string("model", "mlp");
  const bool inline_graph = !nn::graph_from_values(cfg.values()).layers.empty();
  // The cost model's own count of the CNN follows its default shape; another shape is counted
  // from its layers like any graph.
  const bool default_cnn = model == "cnn" && !cfg.has("cnn.channels") && !cfg.has("cnn.hidden") &&
                           !cfg.has("cnn.dropout");
  if (!inline_graph && (model == "mlp" || default_cnn)) return plan::read_workload(cfg, name);
  std::vector<perf::GraphLayer> layers;
  for (const nn::LayerDescription& d :
       nn::describe_layers(plan::read_model_spec(cfg), {1, 28, 28}, 10))
    layers.push_back(
        {d.name, d.kind, double(d.in), double(d.out), double(d.params), double(d.flops)});
  const int64_t batch = plan::read_batch(cfg);
  return perf::workload_from_graph(name, layers, 28 * 28 + 1, batch);
}

}  // namespace loom::experiments
