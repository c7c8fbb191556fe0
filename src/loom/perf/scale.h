// The scaling simulator: one cost model swept from 1 GPU to nodes x gpus_per_node GPUs
// (powers of two inside a node, then whole nodes doubling), for one or more codecs.
#pragma once

#include <string>
#include <vector>

#include "loom/perf/cost_model.h"

namespace loom::perf {

struct ScalePoint {
  int nodes = 1, gpus_per_node = 1;
  StepEstimate est;
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
// JSON lines, one object per point (for scripts and for validation against measurements).
std::string scale_json(const ScaleSeries& s);

}  // namespace loom::perf
