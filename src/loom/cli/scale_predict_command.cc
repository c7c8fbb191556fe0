// `loom scale` (no mode flag): the scaling simulator (perf/scale.h): step time and speedup
// from 1 GPU to nodes x gpus-per-node, a table per codec, and the speedup plot.
#include <fmt/format.h>

#include <fstream>

#include "loom/cli/scale_command.h"
#include "loom/core/error.h"
#include "loom/core/svg_plot.h"
#include "loom/experiments/workloads.h"
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
  cmd.add_flag("--shard-optimizer", a.shard_optimizer,
               "each rank updates 1/n of the parameters (sync.shard_optimizer; fp32 only)");
  cmd.add_flag("--one-host", a.one_host,
               "every node is this one machine (network namespaces): with a calibration, all "
               "ranks share its cores");
  cmd.add_option("--svg", a.svg, "where to write the speedup plot ('' for none)");
}

void run_predict(const CommonArgs& common, const PredictArgs& a) {
  const perf::Workload w = experiments::resolve_workload(common.workload);
  perf::ScaleRequest r;
  r.gpu = common.gpu;
  r.nodes = common.nodes;
  r.gpus_per_node = common.gpus_per_node;
  r.inter = common.inter;
  r.intra = a.intra;
  r.nics = a.nics;
  r.servers = a.servers;
  r.tau = a.tau;
  r.oversubscription = a.oversubscription;
  r.framework = a.framework;
  r.sync = a.sync;
  r.codecs = split_list(a.codecs);
  r.storage = a.storage;
  r.bucket_mb = a.bucket_mb;
  r.overlap = !a.no_overlap;
  r.shard_optimizer = a.shard_optimizer;
  r.one_host = a.one_host;
  r.prefetch = !a.no_prefetch;
  r.derate = common.derate;
  r.calibration = common.catalog.calibration;
  r.train = common.training.spec(w);
  const perf::ScalePrediction p = perf::predict_scale(common.catalog.load(), w, r);
  const perf::Cluster& c = p.cluster;
  const perf::TrainSpec& t = p.train;
  // What loom itself would run: the precision, or that the GPU is not one loom runs.
  std::string loom_note;
  if (!c.gpu.loom_runs())
    loom_note = " (a what-if: loom's GPU backend is CUDA and does not run this GPU)";
  else if (const std::string runs = perf::loom_precision(c.gpu, "mixed"); t.precision != "fp32")
    loom_note = runs == "fp32" ? fmt::format(
                                     " (loom trains in fp32 on the {}: no tensor cores "
                                     "it runs)",
                                     c.gpu.name)
                               : fmt::format(" (loom: precision = \"{}\")", runs);
  fmt::print(
      "workload {}: {:.1f}M params, {:.2f} GFLOP/sample forward; {} x {} {} (intra {}, inter {}), "
      "batch {}/GPU{}, precision {} ({}){}\ncompute: {}\n\n",
      w.name, w.params() / 1e6, w.fwd_flops() / 1e9, common.nodes, common.gpus_per_node, c.gpu.name,
      c.topo.intra.name, c.topo.inter.name, t.batch,
      t.accumulate > 1 ? fmt::format(" x {} micro-batches a step", t.accumulate) : "", t.precision,
      perf::math_plan(c.gpu, t.precision, t.layout).describe(), loom_note, p.compute_note);
  std::vector<svg::Series> plot;
  for (const perf::ScaleSeries& series : p.series) {
    fmt::print("{}\n", common.json ? perf::scale_json(series) : perf::scale_table(series));
    svg::Series curve{series.label, "", {}};
    for (const auto& pt : series.points) curve.points.emplace_back(pt.est.ranks, pt.est.speedup);
    plot.push_back(curve);
  }
  if (!p.band_note.empty() && !common.json) fmt::print("{}\n\n", p.band_note);
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
