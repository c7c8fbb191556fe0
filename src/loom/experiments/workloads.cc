#include "loom/experiments/workloads.h"

#include "loom/core/config.h"
#include "loom/nn/graph/model_description.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/workload_reader.h"

namespace loom::experiments {

perf::Workload resolve_workload(const std::string& name) {
  const size_t n = name.size();
  if (n <= 5 || name.substr(n - 5) != ".toml") return perf::reference_workload(name);
  const Config cfg = Config::from_file(name);
  const nn::ModelSpec spec = plan::read_model_spec(cfg);
  if (plan::counts_own_workload(spec)) return plan::read_workload(cfg, name);
  std::vector<perf::GraphLayer> layers;
  for (const nn::LayerDescription& d : nn::describe_layers(spec, {1, 28, 28}, 10))
    layers.push_back(
        {d.name, d.kind, double(d.in), double(d.out), double(d.params), double(d.flops)});
  const int64_t batch = plan::read_batch(cfg);
  return perf::workload_from_graph(name, layers, 28 * 28 + 1, batch);
}

}  // namespace loom::experiments
