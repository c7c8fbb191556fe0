#include "loom/cli/perf_options.h"

#include "loom/plan/batch_reader.h"
#include "loom/plan/run_plan.h"
#include "loom/plan/sync_reader.h"
#include "loom/train/run_data.h"

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

CLI::Option* add_workload_option(CLI::App& cmd, const std::string& names, std::string& workload) {
  return cmd.add_option(
      names, workload,
      "reference workload (resnet50, vgg16, bert-large, ...) or a loom model config .toml");
}

perf::TrainSpec TrainingOptions::spec(const perf::Workload& w) const {
  perf::TrainSpec t;
  t.batch = batch > 0 ? batch : w.default_batch;
  t.precision = precision;
  t.layout = layout;
  t.optimizer = optimizer;
  t.accumulate = accumulate;
  return t;
}

void add_training_options(CLI::App& cmd, TrainingOptions& o, bool what_loom_runs) {
  cmd.add_option("--batch,-b", o.batch,
                 "samples per GPU per step (per micro-batch with --accumulate; default: the "
                 "workload's)");
  if (what_loom_runs) {
    cmd.add_option("--precision", o.precision,
                   "fp32, or mixed: each GPU at the faster of fp32 and the 16-bit precision loom "
                   "trains in there (bf16 from compute capability 8.0, fp16 on 7.x)")
        ->check(CLI::IsMember({"fp32", "mixed"}));
  } else {
    o.precision = "default";
    cmd.add_option("--precision", o.precision,
                   "fp32 (TF32 off), tf32, default (what PyTorch does: TF32 convolutions on "
                   "Ampere and newer, fp32 matrix products), bf16, fp16, mixed (bf16 from "
                   "compute capability 8.0, fp16 on 7.x) or fp8 (matrix products)")
        ->capture_default_str()
        ->check(CLI::IsMember({"fp32", "tf32", "default", "bf16", "fp16", "mixed", "fp8"}));
    cmd.add_option("--accumulate", o.accumulate,
                   "micro-batches per optimizer step (gradient accumulation): one exchange per "
                   "step")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
  }
  cmd.add_option("--layout", o.layout,
                 "the activations' memory format: nhwc (channels-last, TensorFlow's default) or "
                 "nchw (PyTorch's default), where cuDNN transposes every tensor-core (16-bit or "
                 "TF32) convolution's operands")
      ->capture_default_str()
      ->check(CLI::IsMember({"nhwc", "nchw"}));
  cmd.add_option("--optimizer", o.optimizer, "sgd, momentum or adam");
}

void add_gpus_per_node_option(CLI::App& cmd, int& gpus_per_node) {
  cmd.add_option("--gpus-per-node", gpus_per_node, "GPUs in each machine")
      ->check(CLI::PositiveNumber);
}

measure::ProbeOptions mlp_probe_options(const Config& cfg) {
  measure::ProbeOptions o;
  // Between the config's own data's inputs and outputs.
  const plan::RunPlan run = plan::read_run_plan(cfg);
  const train::DataShape data = train::read_data_shape(run.settings, run.pipeline);
  o.widths = {data.sample_numel()};
  for (int64_t h : cfg.get_int_list("mlp.hidden", {1024, 1024})) o.widths.push_back(h);
  o.widths.push_back(data.outputs);
  o.batch = plan::read_batch(cfg);
  o.dropout = cfg.get_double("mlp.dropout", 0.5, 0.0, 0.99);
  o.bucket_bytes = plan::read_bucket_kib(cfg) * 1024;
  return o;
}

}  // namespace loom::cli
