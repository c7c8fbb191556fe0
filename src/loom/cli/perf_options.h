// Option groups of the commands that ask the performance model (scale, advise, hw list,
// bench calibrate): each option is defined once here, with one help text.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"
#include "loom/perf/workload.h"

namespace loom::cli {

// The hardware catalog: loom's built-in rows plus the user's files, and this machine's
// measured rates.
struct CatalogOptions {
  std::vector<std::string> files;  // --catalog
  std::string calibration;         // --calibration ("" = none)

  // The built-in catalog with `files` loaded over it, in order.
  perf::Catalog load() const;
};
// Adds --catalog and, when `with_calibration`, --calibration.
void add_catalog_options(CLI::App& cmd, CatalogOptions& o, bool with_calibration = true);

// The model to predict for: a reference workload or a loom model config. The commands name
// it differently (scale --workload,-w; advise --model,-m), hence `names`.
CLI::Option* add_workload_option(CLI::App& cmd, const std::string& names, std::string& workload);

// How each GPU trains.
struct TrainingOptions {
  int64_t batch = 0;  // --batch,-b per GPU; 0 = the workload's default
  std::string precision = "fp32";
  std::string layout = "nhwc";  // --layout: the activations' memory format
  std::string optimizer = "momentum";
  int64_t accumulate = 1;  // --accumulate: micro-batches per optimizer step

  // These choices for `w` (batch 0 becomes the workload's default); the rest as TrainSpec's.
  perf::TrainSpec spec(const perf::Workload& w) const;
};
// Adds --batch,-b, --precision, --layout and --optimizer; `what_loom_runs` (the advisor):
// --precision is fp32 or mixed (what loom trains in), else any precision of perf::math_plan, by
// default "default" (what PyTorch does on the GPU), and --accumulate.
void add_training_options(CLI::App& cmd, TrainingOptions& o, bool what_loom_runs = false);

// Adds --gpus-per-node (at least 1).
void add_gpus_per_node_option(CLI::App& cmd, int& gpus_per_node);

// The machine probe's step shapes for the MLP a loom config describes (mlp.hidden between the
// inputs and outputs of the config's own data, which it opens; batch, mlp.dropout,
// sync.bucket_kib); the other fields as ProbeOptions'.
measure::ProbeOptions mlp_probe_options(const Config& cfg);

}  // namespace loom::cli
