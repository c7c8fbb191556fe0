// `loom scale` (no mode flag): the scaling simulator (perf/scale.h): step time and speedup
// from 1 GPU to nodes x gpus-per-node, a table per codec, and the speedup plot.
#include <fmt/format.h>

#include <fstream>

#include "loom/cli/scale_command.h"
#include "loom/core/error.h"
#include "loom/core/svg_plot.h"
#include "loom/perf/calibration.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/scale.h"

namespace loom::cli::scale {

void add_predict_options(CLI::App& cmd, PredictArgs& a) {
  cmd.add_option("--intra", a.intra,
                 "GPU-GPU link inside a machine (default: the GPU's peer link, else its PCIe)");
  cmd.add_option("--nics", a.nics, "NICs per machine")->check(CLI::PositiveNumber);
  cmd.add_option("--oversubscription", a.oversubscription,
                 "the fabric's oversubscription: each machine gets 1/x of its NICs' rate across "
                 "machines")
      ->check(CLI::Range(1.0, 1000.0));
  cmd.add_option("--framework", a.framework,
                 "a [[framework]] row of the catalog whose per-step overhead applies (horovod), "
                 "or none");
  cmd.add_option("--sync", a.sync, "ring, hd, two-level, ps or bmuf");
  cmd.add_option("--servers", a.servers, "parameter servers (with --sync ps)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--tau", a.tau, "steps per block (with --sync bmuf)")->check(CLI::PositiveNumber);
  cmd.add_option("--codec,-c", a.codecs,
                 "codec(s), comma-separated: fp32, fp16, bf16, int8, onebit, topk, powersgd");
  cmd.add_option("--bucket-mb", a.bucket_mb, "gradient bucket size");
  cmd.add_option("--storage", a.storage, "storage each machine reads its input from");
  cmd.add_flag("--no-overlap", a.no_overlap, "communicate after backward instead of during it");
  cmd.add_flag("--no-prefetch", a.no_prefetch, "read input synchronously");
  cmd.add_option("--svg", a.svg, "where to write the speedup plot ('' for none)");
}

void run_predict(const CommonArgs& common, const PredictArgs& a) {
  perf::Catalog cat = common.catalog.load();
  perf::Derating der;
  bool measured_here = false;
  if (!common.catalog.calibration.empty()) {
    // Measured figures describe this machine only: other GPUs keep the default deratings.
    perf::Derating measured;
    perf::read_calibration(common.catalog.calibration).apply(cat, measured);
    if (common.gpu == "this-machine") der = measured, measured_here = true;
  }
  const perf::Workload w = resolve_workload(common.workload);
  const perf::TrainSpec train = common.training.spec(w);
  std::string compute_note = "measured on this machine (--calibration)";
  if (common.derate > 0) {
    der.compute = common.derate;
    compute_note = fmt::format("roofline at --derate {}", common.derate);
  } else if (!measured_here) {
    const perf::ComputeRate rate =
        perf::compute_rate(cat, cat.gpu(common.gpu), w, train.precision, double(train.batch));
    if (rate.method == "roofline")
      der.compute = rate.efficiency;
    else
      der.sample_s = rate.sample_s;
    compute_note = perf::describe(rate);
  }
  perf::Cluster c;
  c.gpu = cat.gpu(common.gpu);
  c.topo.nodes = common.nodes;
  c.topo.gpus_per_node = common.gpus_per_node;
  c.topo.intra = a.intra.empty() ? cat.intra_link_of(c.gpu) : cat.link(a.intra);
  c.topo.inter = cat.link(common.inter);
  c.topo.nics_per_node = a.nics;
  c.topo.servers = a.servers;
  c.topo.oversubscription = a.oversubscription;
  c.storage = cat.storage(a.storage);
  perf::TrainSpec t = train;
  t.prefetch = !a.no_prefetch;
  fmt::print(
      "workload {}: {:.1f}M params, {:.2f} GFLOP/sample forward; {} x {} {} (intra {}, inter {}), "
      "batch {}/GPU, {}{}\ncompute: {}\n\n",
      w.name, w.params() / 1e6, w.fwd_flops() / 1e9, common.nodes, common.gpus_per_node, c.gpu.name,
      c.topo.intra.name, c.topo.inter.name, t.batch, t.precision,
      t.precision == "fp32" ? "" : " (a what-if: loom itself trains in fp32)", compute_note);
  std::vector<svg::Series> plot;
  for (const auto& codec : split_list(a.codecs)) {
    perf::SyncSpec s;
    s.algorithm = a.sync == "bmuf" ? (common.nodes > 1 ? "two-level" : "ring") : a.sync;
    s.bmuf = a.sync == "bmuf";
    s.tau = s.bmuf ? a.tau : 1;
    s.codec = codec;
    s.bucket_mb = a.bucket_mb;
    s.overlap = !a.no_overlap;
    s.step_overhead_s = cat.framework(a.framework).step_overhead_ms * 1e-3;
    perf::CostModel m(w, c, s, t, der);
    const std::string label =
        fmt::format("{} {}{}", a.sync, codec, s.bmuf ? fmt::format(" tau={}", s.tau) : "");
    const perf::ScaleSeries series = perf::sweep(m, label);
    fmt::print("{}\n", common.json ? perf::scale_json(series) : perf::scale_table(series));
    svg::Series curve{label, "", {}};
    for (const auto& p : series.points) curve.points.emplace_back(p.est.ranks, p.est.speedup);
    plot.push_back(curve);
  }
  if (a.svg.empty()) return;
  std::ofstream out(a.svg);
  if (!out) throw InputError(fmt::format("{}: cannot write the plot", a.svg));
  out << svg::speedup_chart(
      fmt::format("{} on {} x {} {} ({} / {})", w.name, common.nodes, common.gpus_per_node,
                  c.gpu.name, c.topo.intra.name, c.topo.inter.name),
      plot);
  fmt::print("plot: {}\n", a.svg);
}

}  // namespace loom::cli::scale
