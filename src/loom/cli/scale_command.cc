// `loom scale`: the scaling simulator (perf/scale.h) from the command line; `--anchors`
// prints the published anchors against the model (perf/anchors.h); `--validate` runs real
// loom jobs here and prints the model's prediction against each (perf/validate.h).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "loom/cli/commands.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/nn/model_description.h"
#include "loom/perf/anchors.h"
#include "loom/perf/calibration.h"
#include "loom/perf/machine_probe.h"
#include "loom/perf/parallelism_model.h"
#include "loom/perf/scale.h"
#include "loom/perf/svg_plot.h"
#include "loom/perf/validate.h"

namespace loom::cli {
namespace {

struct ScaleArgs {
  std::string workload = "resnet50", gpu = "v100-sxm2", intra, inter = "100gbe", storage = "nvme4";
  int nodes = 1, gpus_per_node = 8, nics = 1, servers = 1, tau = 8;
  std::string sync = "ring", codecs = "fp32", precision = "fp32", optimizer = "momentum";
  int64_t batch = 0;
  double bucket_mb = 25, derate = 0;
  bool no_overlap = false, no_prefetch = false, anchors = false, json = false;
  bool validate = false;
  int64_t steps = 150;
  int repeats = 1;
  bool no_paired = false;
  double tolerance = 15;
  std::string cases = "1:fp32,2:fp32,1:onebit,2:onebit", transports = "thread";
  std::string mpirun = perf::kDefaultMpirun;
  // The shaped link (bench/netns/validate.sh): MPI cases launched by `shaped_mpirun` with the
  // ranks in two network namespaces joined by a link shaped to `shaped_gbps`.
  std::string shaped_mpirun, shaped_cases = "2:fp32,2:onebit", mpi_cases;
  double shaped_gbps = 1;
  std::vector<std::string> catalogs;
  std::string calibration, svg = "scale.svg";
  // --parallelism: data vs model vs hybrid (perf/parallelism_model.h)
  bool parallelism = false;
  std::string hidden;    // mlp.hidden for the default MLP, e.g. "8192,8192"
  double link_gbps = 0;  // link in Gbit/s (overrides --inter), e.g. 1 for a 1 Gbit/s link
  double gflops = 0;     // per worker (default: the GPU's fp32 peak x derating)
};

// The zoo model of `cfg` on Fashion-MNIST's shapes (28x28 images, 10 classes), as the
// parallelism model takes it.
perf::ModelShape model_shape(const Config& cfg) {
  const nn::Shape input = {1, 28, 28};
  const int classes = 10;
  perf::ModelShape m;
  m.input = nn::numel(input);
  m.classes = classes;
  for (const nn::LayerDescription& l : nn::describe_layers(cfg, input, classes)) {
    perf::LayerShape s;
    s.kind = l.kind == "Linear" ? perf::LayerKind::kDense : perf::LayerKind::kOther;
    s.in = l.in;
    s.out = l.out;
    s.flops = double(l.flops);
    s.params = double(l.params);
    m.layers.push_back(s);
  }
  return m;
}

// `--parallelism`: which of data, model and hybrid parallelism is faster for the model of
// --workload (a loom .toml, else the default MLP with --hidden) on --inter / --link-gbps.
void run_parallelism(const ScaleArgs& a) {
  Config cfg;
  const bool toml = a.workload.size() > 5 && a.workload.substr(a.workload.size() - 5) == ".toml";
  if (toml) cfg = Config::from_file(a.workload);
  if (!a.hidden.empty()) cfg.set_override("mlp.hidden=[" + a.hidden + "]");
  perf::Catalog cat = perf::Catalog::builtin();
  for (const auto& f : a.catalogs) cat.load_file(f);
  perf::ParallelismSetup s;
  s.workers = a.nodes * a.gpus_per_node;
  s.batch = a.batch > 0 ? a.batch : 128;
  s.link = cat.link(a.inter);
  if (a.link_gbps > 0) {
    s.link.name = fmt::format("{} Gbit/s", a.link_gbps);
    s.link.gbs = a.link_gbps / 8;
    s.link.efficiency = 0.95;
  }
  s.flops_per_s = a.gflops > 0
                      ? a.gflops * 1e9
                      : cat.gpu(a.gpu).fp32_tflops * 1e12 * (a.derate > 0 ? a.derate : 0.5);
  const auto e = perf::compare_parallelism(model_shape(cfg), s);
  fmt::print("{}", a.json ? perf::parallelism_json(e, s) : perf::parallelism_table(e, s));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// `--validate`: calibration (the file, or measured now on the thread transport), then each
// case run for real and predicted from the same loom config.
void run_validate(const ScaleArgs& a) {
  Config cfg;
  const bool toml = a.workload.size() > 5 && a.workload.substr(a.workload.size() - 5) == ".toml";
  if (toml) cfg = Config::from_file(a.workload);
  perf::Calibration cal;
  if (!a.calibration.empty()) {
    cal = perf::read_calibration(a.calibration);
  } else {
    fmt::print("# no --calibration FILE: measuring this machine now (loom bench calibrate)\n");
    std::string lines;
    perf::probe_machine(perf::ProbeOptions{}, nullptr,
                        [&](const nlohmann::json& j) { lines += j.dump() + "\n"; });
    cal = perf::parse_calibration(lines, "calibration measured now");
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<perf::ValidationRow> rows;
  struct Planned {
    perf::ValidationCase c;
    std::string mpirun;
  };
  std::vector<Planned> plan;
  auto parse_case = [](const std::string& spec, const std::string& transport) {
    perf::ValidationCase c;
    const size_t colon = spec.find(':');
    if (colon == std::string::npos)
      throw InputError(fmt::format("--cases '{}': write WORKERS:CODEC, e.g. 2:onebit", spec));
    c.workers = std::stoi(spec.substr(0, colon));
    c.codec = spec.substr(colon + 1);
    c.transport = transport;
    return c;
  };
  for (const auto& transport : split(a.transports))
    for (const auto& spec :
         split(transport == "mpi" && !a.mpi_cases.empty() ? a.mpi_cases : a.cases))
      plan.push_back({parse_case(spec, transport), a.mpirun});
  if (!a.shaped_mpirun.empty())
    for (const auto& spec : split(a.shaped_cases)) {
      Planned p{parse_case(spec, "mpi"), a.shaped_mpirun};
      p.c.link_gbps = a.shaped_gbps;
      plan.push_back(p);
    }
  {
    for (const auto& [c, mpirun] : plan) {
      for (int rep = 0; rep < a.repeats; ++rep) {
        fmt::print("# running {} ({} steps) ...\n", c.label(), a.steps);
        std::fflush(stdout);
        perf::Calibration now = cal;
        perf::ProbeOptions po;
        po.widths = {784};
        for (int64_t h : cfg.get_int_list("mlp.hidden", {1024, 1024})) po.widths.push_back(h);
        po.widths.push_back(10);
        po.batch = cfg.get_int("batch", 128, 1, 1 << 20);
        po.dropout = cfg.get_double("mlp.dropout", 0.5, 0.0, 0.99);
        po.bucket_bytes = cfg.get_int("sync.bucket_kib", 4096, 0, int64_t(1) << 30) * 1024;
        const int threads = int(cfg.get_int("threads", 1, 1, 256));
        const bool paired = !a.no_paired;
        const perf::HostRates before =
            paired ? perf::probe_run_rates(po, c.workers, threads, c.codec) : perf::HostRates{};
        perf::ValidationRow r;
        r.c = c;
        r.measured = perf::measure_case(cfg, c, a.steps, self, mpirun);
        if (paired) {
          const perf::HostRates after = perf::probe_run_rates(po, c.workers, threads, c.codec);
          perf::merge_paired_rates(now.host, before, after);
        }
        r.predicted = perf::predict_case(cfg, now, c);
        rows.push_back(r);
      }
    }
  }
  fmt::print(
      "\nloom scale --validate: predicted against measured step time ({}; calibration: "
      "{})\n\n{}\n{}",
      toml ? a.workload : "default MLP config", cal.file,
      perf::validation_table(rows, a.tolerance / 100), perf::validation_json(rows));
  // One command prints both tables (the "done when").
  if (a.anchors) fmt::print("\n{}", perf::anchors_report());
}

void run_scale(const ScaleArgs& a) {
  if (a.validate) {
    run_validate(a);
    return;
  }
  if (a.parallelism) {
    run_parallelism(a);
    return;
  }
  if (a.anchors) {
    fmt::print("{}", perf::anchors_report());
    return;
  }
  perf::Catalog cat = perf::Catalog::builtin();
  for (const auto& f : a.catalogs) cat.load_file(f);
  perf::Derating der;
  if (!a.calibration.empty()) {
    // Measured figures describe this machine only: other GPUs keep the default deratings.
    perf::Derating measured;
    perf::read_calibration(a.calibration).apply(cat, measured);
    if (a.gpu == "this-machine") der = measured;
  }
  if (a.derate > 0) der.compute = a.derate;
  perf::Workload w = perf::resolve_workload(a.workload);
  perf::Cluster c;
  c.gpu = cat.gpu(a.gpu);
  c.topo.nodes = a.nodes;
  c.topo.gpus_per_node = a.gpus_per_node;
  c.topo.intra = a.intra.empty() ? cat.intra_link_of(c.gpu) : cat.link(a.intra);
  c.topo.inter = cat.link(a.inter);
  c.topo.nics_per_node = a.nics;
  c.topo.servers = a.servers;
  c.storage = cat.storage(a.storage);
  perf::TrainSpec t;
  t.batch = a.batch > 0 ? a.batch : w.default_batch;
  t.precision = a.precision;
  t.optimizer = a.optimizer;
  t.prefetch = !a.no_prefetch;
  std::vector<perf::PlotSeries> plot;
  fmt::print(
      "workload {}: {:.1f}M params, {:.2f} GFLOP/sample forward; {} x {} {} (intra {}, inter {}), "
      "batch {}/GPU, {}\n\n",
      w.name, w.params() / 1e6, w.fwd_flops() / 1e9, a.nodes, a.gpus_per_node, c.gpu.name,
      c.topo.intra.name, c.topo.inter.name, t.batch, t.precision);
  for (const auto& codec : split(a.codecs)) {
    perf::SyncSpec s;
    s.algorithm = a.sync == "bmuf" ? (a.nodes > 1 ? "two-level" : "ring") : a.sync;
    s.bmuf = a.sync == "bmuf";
    s.tau = s.bmuf ? a.tau : 1;
    s.codec = codec;
    s.bucket_mb = a.bucket_mb;
    s.overlap = !a.no_overlap;
    perf::CostModel m(w, c, s, t, der);
    std::string label =
        fmt::format("{} {}{}", a.sync, codec, s.bmuf ? fmt::format(" tau={}", s.tau) : "");
    perf::ScaleSeries series = perf::sweep(m, label);
    fmt::print("{}\n", a.json ? perf::scale_json(series) : perf::scale_table(series));
    perf::PlotSeries ps{label, {}};
    for (const auto& p : series.points) ps.xy.emplace_back(p.est.ranks, p.est.speedup);
    plot.push_back(ps);
  }
  if (!a.svg.empty()) {
    std::ofstream out(a.svg);
    if (!out) throw InputError(fmt::format("{}: cannot write the plot", a.svg));
    out << perf::speedup_svg(
        fmt::format("{} on {} x {} {} ({} / {})", w.name, a.nodes, a.gpus_per_node, c.gpu.name,
                    c.topo.intra.name, c.topo.inter.name),
        plot);
    fmt::print("plot: {}\n", a.svg);
  }
}

void setup(CLI::App& app) {
  auto a = std::make_shared<ScaleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "scale", "predict step time and speedup from 1 GPU to nodes x gpus-per-node");
  cmd->add_option(
      "--workload,-w", a->workload,
      "reference workload (resnet50, vgg16, bert-large, ...) or a loom model config .toml");
  cmd->add_option("--gpu,-g", a->gpu, "GPU name from the catalog (`loom hw list`)");
  cmd->add_option("--nodes", a->nodes, "machines")->check(CLI::PositiveNumber);
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs in each machine")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--intra", a->intra,
                  "GPU-GPU link inside a machine (default: the GPU's peer link, else its PCIe)");
  cmd->add_option("--inter", a->inter, "link between machines");
  cmd->add_option("--nics", a->nics, "NICs per machine")->check(CLI::PositiveNumber);
  cmd->add_option("--sync", a->sync, "ring, hd, two-level, ps or bmuf");
  cmd->add_option("--servers", a->servers, "parameter servers (with --sync ps)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tau", a->tau, "steps per block (with --sync bmuf)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--codec,-c", a->codecs,
                  "codec(s), comma-separated: fp32, fp16, bf16, int8, onebit, topk, powersgd");
  cmd->add_option("--batch,-b", a->batch, "samples per GPU per step (default: the workload's)");
  cmd->add_option("--precision", a->precision, "fp32 or mixed");
  cmd->add_option("--optimizer", a->optimizer, "sgd, momentum or adam");
  cmd->add_option("--bucket-mb", a->bucket_mb, "gradient bucket size");
  cmd->add_option("--storage", a->storage, "storage each machine reads its input from");
  cmd->add_option("--derate", a->derate,
                  "achievable fraction of peak FLOP/s (default 0.5, or calibration's)");
  cmd->add_flag("--no-overlap", a->no_overlap, "communicate after backward instead of during it");
  cmd->add_flag("--no-prefetch", a->no_prefetch, "read input synchronously");
  cmd->add_option("--catalog", a->catalogs, "extra catalog file(s) with your own rows");
  cmd->add_option("--calibration", a->calibration, "JSON lines printed by loom's benchmarks");
  cmd->add_option("--svg", a->svg, "where to write the speedup plot ('' for none)");
  cmd->add_flag("--json", a->json, "print JSON lines instead of tables");
  cmd->add_flag("--parallelism", a->parallelism,
                "data vs model vs hybrid parallelism for a loom model (--workload .toml or "
                "--hidden), workers = nodes x gpus-per-node");
  cmd->add_option("--hidden", a->hidden, "with --parallelism: mlp.hidden, e.g. 8192,8192");
  cmd->add_option("--link-gbps", a->link_gbps,
                  "with --parallelism: the workers' link in Gbit/s (instead of --inter)");
  cmd->add_option("--gflops", a->gflops, "with --parallelism: achieved GFLOP/s per worker");
  cmd->add_flag("--anchors", a->anchors, "print the published anchors against the model and exit");
  cmd->add_flag("--validate", a->validate,
                "run real loom jobs here (workload: a loom config .toml, or the default MLP) and "
                "print predicted against measured step time");
  cmd->add_option("--steps", a->steps, "training steps per validation run")
      ->check(CLI::Range(10, 100000));
  cmd->add_option("--cases", a->cases, "validation runs, WORKERS:CODEC comma-separated");
  cmd->add_option("--transports", a->transports,
                  "thread and/or mpi (mpi: runs mpirun, needs mpi allreduce lines in the "
                  "calibration)");
  cmd->add_option("--tolerance", a->tolerance, "pass mark for the error, percent");
  cmd->add_option("--repeats", a->repeats, "runs of each case")->check(CLI::Range(1, 20));
  cmd->add_flag("--no-paired", a->no_paired,
                "predict from the calibration alone (default: GEMM, a += b and elementwise "
                "rates re-measured right before and after each run, averaged)");
  cmd->add_option("--shaped-mpirun", a->shaped_mpirun,
                  "launcher line for MPI ranks on a shaped link (bench/netns/validate.sh "
                  "passes one): adds the --shaped-cases, predicted for a --shaped-gbps link");
  cmd->add_option("--mpi-cases", a->mpi_cases,
                  "runs for the mpi transport, WORKERS:CODEC (default: --cases)");
  cmd->add_option("--shaped-cases", a->shaped_cases, "shaped-link runs, WORKERS:CODEC");
  cmd->add_option("--shaped-gbps", a->shaped_gbps, "the shaped link's rate, Gbit/s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mpirun", a->mpirun,
                  "launcher line for mpi cases (a script running ranks in network namespaces "
                  "passes its own)");
  cmd->callback([a] { run_scale(*a); });
}

CommandRegistrar reg("scale", setup);

}  // namespace
}  // namespace loom::cli
