#include "loom/experiments/workloads.h"

#include "loom/core/config.h"
#include "loom/nn/graph/model_description.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/run_plan.h"
#include "loom/plan/workload_reader.h"
#include "loom/train/run_data.h"

namespace loom::experiments {

perf::Workload resolve_workload(const std::string& name) {
  const size_t n = name.size();
  if (n <= 5 || name.substr(n - 5) != ".toml") return perf::reference_workload(name);
  const Config cfg = Config::from_file(name);
  const nn::ModelSpec spec = plan::read_model_spec(cfg);
  // The config's own data sizes the graph: its sample shape and outputs, and the bytes a
  // sample takes where it is stored (an IDX file: a byte a pixel and a byte for the label).
  const plan::RunPlan run = plan::read_run_plan(cfg);
  const train::DataShape data = train::read_data_shape(run.settings, run.pipeline);
  const bool idx_images = run.pipeline.train_shards.empty() && !data.tokens;
  const bool default_shape = data.sample == nn::Shape{1, 28, 28} && data.outputs == 10;
  if (default_shape && plan::counts_own_workload(spec)) return plan::read_workload(cfg, name);
  std::vector<perf::GraphLayer> layers;
  for (const nn::LayerDescription& d : nn::describe_layers(spec, data.sample, data.outputs))
    layers.push_back(
        {d.name, d.kind, double(d.in), double(d.out), double(d.params), double(d.flops)});
  const double input_bytes =
      idx_images ? double(data.sample_numel() + 1) : double(data.record_bytes);
  return perf::workload_from_graph(name, layers, input_bytes, run.settings.batch);
}

}  // namespace loom::experiments
