#include "loom/cli/perf_options.h"

#include "loom/nn/graph_spec.h"
#include "loom/nn/model_description.h"

namespace loom::cli {

perf::Catalog CatalogOptions::load() const {
  perf::Catalog cat = perf::Catalog::builtin();
  for (const auto& f : files) cat.load_file(f);
  return cat;
}

void add_catalog_options(CLI::App& cmd, CatalogOptions& o, bool with_calibration) {
  cmd.add_option("--catalog", o.files, "extra catalog file(s) with your own rows");
  if (with_calibration)
    cmd.add_option("--calibration", o.calibration,
                   "file written by `loom bench calibrate`: this machine joins the catalog as "
                   "'this-machine', predicted from its measured rates");
}

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

CLI::Option* add_workload_option(CLI::App& cmd, const std::string& names, std::string& workload) {
  return cmd.add_option(
      names, workload,
      "reference workload (resnet50, vgg16, bert-large, ...) or a loom model config .toml");
}

perf::TrainSpec TrainingOptions::spec(const perf::Workload& w) const {
  perf::TrainSpec t;
  t.batch = batch > 0 ? batch : w.default_batch;
  t.precision = precision;
  t.optimizer = optimizer;
  return t;
}

void add_training_options(CLI::App& cmd, TrainingOptions& o) {
  cmd.add_option("--batch,-b", o.batch, "samples per GPU per step (default: the workload's)");
  cmd.add_option("--precision", o.precision, "fp32 or mixed");
  cmd.add_option("--optimizer", o.optimizer, "sgd, momentum or adam");
}

void add_gpus_per_node_option(CLI::App& cmd, int& gpus_per_node) {
  cmd.add_option("--gpus-per-node", gpus_per_node, "GPUs in each machine")
      ->check(CLI::PositiveNumber);
}

measure::ProbeOptions mlp_probe_options(const Config& cfg) {
  measure::ProbeOptions o;
  o.widths = {784};
  for (int64_t h : cfg.get_int_list("mlp.hidden", {1024, 1024})) o.widths.push_back(h);
  o.widths.push_back(10);
  o.batch = cfg.get_int("batch", 128, 1, 1 << 20);
  o.dropout = cfg.get_double("mlp.dropout", 0.5, 0.0, 0.99);
  o.bucket_bytes = cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30) * 1024;
  return o;
}

}  // namespace loom::cli
