// The scaling simulator: one cost model swept from 1 GPU to nodes x gpus_per_node GPUs
// (powers of two inside a node, then whole nodes doubling), for one or more codecs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"

namespace loom::perf {

struct ScalePoint {
  int nodes = 1, gpus_per_node = 1;
  StepEstimate est;
  // Where the compute is the model's: its error band at this size (validation_set.h
  // prediction_band), and the samples/s the slowest and the fastest training software of the
  // validation set would publish (framework_term.h); band < 0 and 0 elsewhere.
  double band = -1;
  std::string band_basis;
  double slowest_software_samples_per_s = 0, fastest_software_samples_per_s = 0;
};

struct ScaleSeries {
  std::string label;  // codec (and strategy)
  std::vector<ScalePoint> points;
};

// GPU counts of the sweep: 1, 2, 4, .. K on one node, then 2K, 4K, .. M*K (and M*K itself).
std::vector<std::pair<int, int>> sweep_shapes(int nodes, int gpus_per_node);

ScaleSeries sweep(const CostModel& model, const std::string& label);

// A plain-text table of one series: GPUs, step time and its parts, samples/s, speedup, eff.
std::string scale_table(const ScaleSeries& s);
// One point as a JSON object: what `loom scale --json` prints on each line.
nlohmann::json scale_point_json(const ScaleSeries& s, const ScalePoint& p);
// JSON lines, one object per point (for scripts and for validation against measurements).
std::string scale_json(const ScaleSeries& s);

// `loom scale` without a mode flag as one call (the command line and the Python package's
// loom.scale): the cluster, sync and training choices, one series per codec.
struct ScaleRequest {
  std::string gpu = "v100-sxm2";
  int nodes = 1, gpus_per_node = 8;
  std::string inter = "100gbe";
  std::string intra;  // "" = the GPU's peer link, else its PCIe
  int nics = 1, servers = 1, tau = 8;
  double oversubscription = 1;
  std::string framework = "none";  // a [[framework]] row whose per-step overhead applies
  std::string sync = "ring";       // ring, hd, two-level, ps or bmuf
  std::vector<std::string> codecs = {"fp32"};
  std::string storage = "nvme4";
  double bucket_mb = 25;
  bool overlap = true, prefetch = true;
  // ZeRO-1 as loom's sync.shard_optimizer: with fp32 each rank updates 1/n of the parameters.
  bool shard_optimizer = false;
  // All nodes are this one machine (network namespaces): their ranks share its cores.
  bool one_host = false;
  double derate = 0;        // achievable fraction of peak FLOP/s; 0: the catalog's rate
  std::string calibration;  // `loom bench calibrate` output: the rates of gpu "this-machine"
  TrainSpec train;          // batch already resolved (the workload's default when not given)
};

struct ScalePrediction {
  Cluster cluster;
  TrainSpec train;
  std::string compute_note;  // where the compute rate came from
  std::vector<ScaleSeries> series;
  // The model's error band at the first and last size of the first series, and the framework
  // term's range (framework_term.h); empty where the compute is measured or --derate'd.
  std::string band_note;
};

// Sets each point's band and framework range for GPU `g` at `precision`.
void add_bands(const GpuSpec& g, const std::string& precision, ScaleSeries& s);
// What `band_note` says for a series with its bands.
std::string band_note(const ScaleSeries& s);

// Errors as the catalog's lookups raise them (an unknown GPU, link, storage or framework).
ScalePrediction predict_scale(Catalog cat, const Workload& w, const ScaleRequest& r);

}  // namespace loom::perf
