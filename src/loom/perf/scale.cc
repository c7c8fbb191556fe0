#include "loom/perf/scale.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace loom::perf {

std::vector<std::pair<int, int>> sweep_shapes(int nodes, int gpus_per_node) {
  std::vector<std::pair<int, int>> out;
  for (int k = 1; k < gpus_per_node; k *= 2) out.emplace_back(1, k);
  out.emplace_back(1, gpus_per_node);
  for (int m = 2; m < nodes; m *= 2) out.emplace_back(m, gpus_per_node);
  if (nodes > 1) out.emplace_back(nodes, gpus_per_node);
  return out;
}

ScaleSeries sweep(const CostModel& model, const std::string& label) {
  ScaleSeries s;
  s.label = label;
  const Topology& t = model.cluster().topo;
  for (auto [m, k] : sweep_shapes(t.nodes, t.gpus_per_node))
    s.points.push_back({m, k, model.estimate_at(m, k)});
  return s;
}

std::string scale_table(const ScaleSeries& s) {
  std::string out = fmt::format("{}\n", s.label);
  out +=
      fmt::format("{:>6} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8} {:>6}  {}\n",
                  "gpus", "nodes", "compute", "comm", "exposed", "wait", "input", "step",
                  "samples/s", "speedup", "eff", "dominant");
  for (const auto& p : s.points) {
    const StepEstimate& e = p.est;
    out += fmt::format(
        "{:>6} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12.1f} {:>8.2f} {:>5.0f}%  "
        "{}{}\n",
        e.ranks, p.nodes, format_seconds(e.compute_s()), format_seconds(e.comm_s + e.codec_s),
        format_seconds(e.comm_exposed_s), format_seconds(e.straggler_s + e.overhead_s),
        format_seconds(e.input_exposed_s), format_seconds(e.step_s), e.samples_per_s, e.speedup,
        100 * e.efficiency, e.dominant(), e.fits ? "" : " (does not fit)");
  }
  return out;
}

std::string scale_json(const ScaleSeries& s) {
  std::string out;
  for (const auto& p : s.points) {
    const StepEstimate& e = p.est;
    nlohmann::json j = {{"series", s.label},
                        {"gpus", e.ranks},
                        {"nodes", p.nodes},
                        {"compute_s", e.fwd_s + e.bwd_s},
                        {"comm_s", e.comm_s},
                        {"codec_s", e.codec_s},
                        {"exposed_s", e.comm_exposed_s},
                        {"input_s", e.input_exposed_s},
                        {"straggler_s", e.straggler_s},
                        {"overhead_s", e.overhead_s},
                        {"dominant", e.dominant()},
                        {"update_s", e.update_s},
                        {"step_s", e.step_s},
                        {"samples_per_s", e.samples_per_s},
                        {"speedup", e.speedup},
                        {"efficiency", e.efficiency},
                        {"memory_bytes", e.memory.total()},
                        {"fits", e.fits},
                        {"limiter", e.limiter}};
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace loom::perf
