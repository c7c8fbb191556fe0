// `loom scale` is one subcommand with four modes. scale_command.cc registers it with the
// options more than one mode reads, lets each mode add its own, and runs the mode the flags
// choose: --validate (scale_validate_command.cc), else --parallelism
// (scale_parallelism_command.cc), else --anchors (scale_anchors_command.cc), else the scaling
// prediction (scale_predict_command.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "loom/cli/perf_options.h"
#include "loom/core/config.h"
#include "loom/experiments/validate.h"

namespace loom::cli::scale {

struct CommonArgs {
  std::string workload = "resnet50";  // a reference workload or a loom model config .toml
  std::string gpu = "v100-sxm2";
  int nodes = 1, gpus_per_node = 8;
  std::string inter = "100gbe";
  double derate = 0;  // 0: the default, or the calibration's
  TrainingOptions training;
  CatalogOptions catalog;
  bool json = false;
  bool anchors = false;  // its own mode, or after --validate's tables
};

// The scaling prediction (perf/scale.h): a table per codec and the speedup plot.
struct PredictArgs {
  std::string intra;  // "" = the GPU's peer link, else its PCIe
  int nics = 1, servers = 1, tau = 8;
  double oversubscription = 1;
  std::string framework = "none";
  std::string sync = "ring", codecs = "fp32", storage = "nvme4";
  double bucket_mb = 25;
  bool no_overlap = false, no_prefetch = false, shard_optimizer = false, one_host = false;
  std::string svg = "scale.svg";
};
void add_predict_options(CLI::App& cmd, PredictArgs& a);
void run_predict(const CommonArgs& common, const PredictArgs& a);

// --parallelism: data vs model vs hybrid parallelism (perf/parallelism_model.h).
struct ParallelismArgs {
  bool chosen = false;
  std::string hidden;    // mlp.hidden for the default MLP, e.g. "8192,8192"
  double link_gbps = 0;  // link in Gbit/s (overrides --inter), e.g. 1 for a 1 Gbit/s link
  double gflops = 0;     // per worker (default: the GPU's fp32 peak x derating)
};
void add_parallelism_options(CLI::App& cmd, ParallelismArgs& a);
void run_parallelism(const CommonArgs& common, const ParallelismArgs& a);

// --anchors: the published validation set against the model (perf/validation_set.h).
void add_anchors_option(CLI::App& cmd, bool& anchors);
void run_anchors();

// --validate: real loom jobs here against the model's prediction (experiments/validate.h).
struct ValidateArgs {
  bool chosen = false;
  int64_t steps = 150;
  int repeats = 1;
  bool no_paired = false;
  double tolerance = 15;  // percent
  std::string cases = "1:fp32,2:fp32,1:onebit,2:onebit", transports = "thread";
  std::string mpirun = experiments::kDefaultMpirun;
  std::string mpi_cases;  // "" = cases
  // The shaped link (bench/netns/validate.sh): MPI cases launched by `shaped_mpirun` with the
  // ranks in two network namespaces joined by a link shaped to `shaped_gbps`.
  std::string shaped_mpirun, shaped_cases = "2:fp32,2:onebit";
  double shaped_gbps = 1;
};
void add_validate_options(CLI::App& cmd, ValidateArgs& a);
void run_validate(const CommonArgs& common, const ValidateArgs& a);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& s);
// Whether --workload names a loom model config (.toml) rather than a reference workload.
bool is_model_config(const std::string& workload);
// The loom config --workload names; the defaults (the default MLP) for a reference workload.
Config model_config(const std::string& workload);

}  // namespace loom::cli::scale
