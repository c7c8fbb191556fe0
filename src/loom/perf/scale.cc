#include "loom/perf/scale.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "loom/perf/calibration.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/framework_term.h"
#include "loom/perf/validation_set.h"

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
  for (auto [m, k] : sweep_shapes(t.nodes, t.gpus_per_node)) {
    ScalePoint p;
    p.nodes = m;
    p.gpus_per_node = k;
    p.est = model.estimate_at(m, k);
    s.points.push_back(p);
  }
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

nlohmann::json scale_point_json(const ScaleSeries& s, const ScalePoint& p) {
  const StepEstimate& e = p.est;
  return {{"series", s.label},
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
          {"limiter", e.limiter},
          {"band", p.band >= 0 ? nlohmann::json(p.band) : nlohmann::json(nullptr)},
          {"band_basis", p.band_basis},
          {"slowest_software_samples_per_s", p.slowest_software_samples_per_s},
          {"fastest_software_samples_per_s", p.fastest_software_samples_per_s}};
}

std::string scale_json(const ScaleSeries& s) {
  std::string out;
  for (const auto& p : s.points) out += scale_point_json(s, p).dump() + "\n";
  return out;
}

ScalePrediction predict_scale(Catalog cat, const Workload& w, const ScaleRequest& r) {
  Derating der;
  bool measured_here = false;
  if (!r.calibration.empty()) {
    // Measured figures describe this machine only: other GPUs keep the default deratings.
    Derating measured;
    read_calibration(r.calibration).apply(cat, measured);
    if (r.gpu == "this-machine") der = measured, measured_here = true;
  }
  ScalePrediction out;
  out.compute_note = "measured on this machine (--calibration)";
  const bool from_model = r.derate <= 0 && !measured_here;
  if (r.derate > 0) {
    der.compute = r.derate;
    out.compute_note = fmt::format("roofline at --derate {}", r.derate);
  } else if (!measured_here) {
    const ComputeRate rate = compute_rate(cat, cat.gpu(r.gpu), w, r.train.precision,
                                          double(r.train.batch), kComputeFit, "", r.train.layout);
    der.use(rate);
    out.compute_note = describe(rate);
  }
  Cluster& c = out.cluster;
  c.gpu = cat.gpu(r.gpu);
  c.topo.nodes = r.nodes;
  c.topo.gpus_per_node = r.gpus_per_node;
  c.topo.intra = r.intra.empty() ? cat.intra_link_of(c.gpu) : cat.link(r.intra);
  c.topo.inter = cat.link(r.inter);
  c.topo.nics_per_node = r.nics;
  c.topo.servers = r.servers;
  c.topo.oversubscription = r.oversubscription;
  c.topo.nodes_share_host = r.one_host;
  c.storage = cat.storage(r.storage);
  out.train = r.train;
  out.train.prefetch = r.prefetch;
  for (const auto& codec : r.codecs) {
    SyncSpec s;
    s.algorithm = r.sync == "bmuf" ? (r.nodes > 1 ? "two-level" : "ring") : r.sync;
    s.bmuf = r.sync == "bmuf";
    s.tau = s.bmuf ? r.tau : 1;
    s.codec = codec;
    s.bucket_mb = r.bucket_mb;
    s.overlap = r.overlap;
    s.shard_optimizer = r.shard_optimizer;
    s.step_overhead_s = cat.framework(r.framework).step_overhead_ms * 1e-3;
    // Another framework's coordination replaces loom's step agreement.
    if (r.framework != "none") s.step_agreement_bytes = 0;
    const CostModel m(w, c, s, out.train, der);
    out.series.push_back(sweep(
        m, fmt::format("{} {}{}", r.sync, codec, s.bmuf ? fmt::format(" tau={}", s.tau) : "")));
  }
  if (from_model) {
    for (ScaleSeries& series : out.series) add_bands(c.gpu, out.train.precision, series);
    if (!out.series.empty() && !out.series.front().points.empty())
      out.band_note = band_note(out.series.front());
  }
  return out;
}

void add_bands(const GpuSpec& g, const std::string& precision, ScaleSeries& s) {
  const FrameworkTerm& t = builtin_framework_term();
  for (ScalePoint& p : s.points) {
    const PredictionBand b = prediction_band(builtin_validation(), g, precision, p.est.ranks);
    p.band = b.band;
    p.band_basis = b.basis;
    if (!t.valid()) continue;
    p.slowest_software_samples_per_s = t.slowest(p.est.samples_per_s);
    p.fastest_software_samples_per_s = t.fastest(p.est.samples_per_s);
  }
}

std::string band_note(const ScaleSeries& s) {
  const ScalePoint& one = s.points.front();
  const ScalePoint& all = s.points.back();
  std::string o =
      fmt::format("band: +-{:.1f}% at {} GPU ({})", 100 * one.band, one.est.ranks, one.band_basis);
  if (all.est.ranks != one.est.ranks)
    o += fmt::format(", +-{:.1f}% at {}", 100 * all.band, all.est.ranks);
  if (const FrameworkTerm& t = builtin_framework_term(); t.valid())
    o += fmt::format(
        "\nframeworks: {}: {} GPU at {:.1f}-{:.1f} samples/s from the slowest software's "
        "offset to the fastest's (docs/perf.md, the framework term)",
        t.describe(), one.est.ranks, one.slowest_software_samples_per_s,
        one.fastest_software_samples_per_s);
  return o;
}

}  // namespace loom::perf
