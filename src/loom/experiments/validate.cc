#include "loom/experiments/validate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loom/core/error.h"
#include "loom/perf/workload.h"
#include "loom/plan/run_plan.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/train/run_writer.h"
#include "loom/train/trainer.h"

namespace loom::experiments {

using namespace loom::perf;

std::string ValidationCase::label() const {
  return fmt::format("{} worker{} {} {}{}", workers, workers == 1 ? "" : "s", codec, transport,
                     link_gbps > 0 ? fmt::format(" {:g}Gbit/s", link_gbps) : "");
}

double prediction_error(double predicted, double measured) {
  if (!(measured > 0) || !std::isfinite(predicted))
    throw InputError(fmt::format("cannot compare prediction {} with measured step time {}",
                                 predicted, measured));
  return (predicted - measured) / measured;
}

bool within_tolerance(double error, double tolerance) {
  return std::abs(error) <= tolerance;
}

double ValidationRow::error() const {
  return prediction_error(predicted.step_s, measured.step_s);
}

StepEstimate predict_case(const plan::RunPlan& run, const Calibration& cal,
                          const ValidationCase& c) {
  if (!cal.host.valid())
    throw InputError(fmt::format(
        "{}: no host rates (gemm with workers/threads, membw op add, host cores): write the "
        "file with `loom bench calibrate`",
        cal.file));
  Catalog cat = Catalog::builtin();
  Derating d;
  cal.apply(cat, d);
  Workload w = plan::read_workload(run, "loom config");
  Cluster cl;
  cl.gpu = cat.gpu("this-machine");
  cl.topo.nodes = 1;
  cl.topo.gpus_per_node = c.workers;
  const std::string link = "this-machine-" + c.transport;
  if (c.workers > 1 && !cat.has_link(link))
    throw InputError(fmt::format(
        "{}: no allreduce lines for transport '{}'{}", cal.file, c.transport,
        c.transport == "mpi" ? " (run `mpirun -np 2 loom bench calibrate -o FILE`)" : ""));
  cl.topo.intra = cat.has_link(link) ? cat.link(link) : cat.link("this-machine-memory");
  // The codec as the communication thread runs it: beside busy compute threads.
  for (const auto& [k, v] : d.host.busy_codec_gbs) d.codec_enc_dec_gbs[k] = v;
  // With every core taken by a compute thread, the exchange slows the compute by the share
  // measured beside busy compute (host_model.h BusyLink).
  const int threads = int(run.settings.threads);
  const auto busy = d.host.busy.find(c.transport);
  if (c.workers > 1 && c.workers * threads >= d.host.cores && busy != d.host.busy.end())
    d.host.link_steal = busy->second.steal;
  if (c.link_gbps > 0) {
    // A link shaped to `link_gbps` (tbf): TCP over Ethernet frames carries 1448 payload bytes
    // in 1514 on the wire (MTU 1500, TCP timestamps), so at most 95.6% of the rate is data.
    // The host's own exchange (its alpha, its CPU speed) stays; the bandwidth is the lesser.
    const double shaped = c.link_gbps * 1e9 / 8 * (1448.0 / 1514.0);
    const double host_bw = cl.topo.intra.bytes_per_s();
    if (shaped < host_bw) {
      cl.topo.intra.gbs = shaped / 1e9;
      cl.topo.intra.efficiency = 1;
      cl.topo.intra.name = fmt::format("{} Gbit/s shaped", c.link_gbps);
    }
  }
  cl.topo.inter = cl.topo.intra;
  if (cal.loader_bytes_per_s > 0) cl.storage = cat.storage("this-machine-loader");
  SyncSpec s;
  s.codec = c.codec;
  if (run.bucket_auto)
    throw ConfigError(
        fmt::format("{}: sync.bucket_kib = \"auto\": the prediction needs a size", run.sync_where));
  s.bucket_mb = double(run.bucket_kib) * 1024 / 1e6;
  if (s.bucket_mb <= 0) s.bucket_mb = 4 * w.params() / 1e6 + 1;  // 0 = one bucket
  s.overlap = plan::overlap(run, c.workers, d.host.cores, false);
  s.shard_optimizer = run.shard_optimizer;
  TrainSpec t;
  t.batch = run.settings.batch;
  t.threads = threads;
  const bool adam = run.optimizer.name == "adam" || run.optimizer.name == "onebit_adam";
  t.optimizer = adam ? "adam" : run.optimizer.momentum > 0 ? "momentum" : "sgd";
  CostModel m(w, cl, s, t, d);
  return m.estimate_at(1, c.workers);
}

namespace {

Measured from_epochs(const std::vector<train::EpochMetrics>& epochs) {
  Measured m;
  double seconds = 0;
  for (const auto& e : epochs) {
    m.steps += e.steps;
    seconds += e.seconds;
    m.compute_s += e.compute_s;
    m.exposed_s += e.exposed_comm_s;
    m.loader_wait_s += e.loader_wait_s;
  }
  if (m.steps == 0) throw InputError("the validation run made no steps");
  const double n = double(m.steps);
  m.step_s = seconds / n;
  m.compute_s /= n;
  m.exposed_s /= n;
  m.loader_wait_s /= n;
  return m;
}

// The case's run: its workers and codec, `steps` steps, quiet, no evaluation, on `transport`,
// writing into `output_dir`.
plan::RunPlan case_run(const plan::RunPlan& run, const ValidationCase& c, int64_t steps,
                       const std::string& output_dir) {
  return plan::with_settings(run,
                             {{"workers", int64_t(c.workers)},
                              {"max_steps", steps},
                              {"epochs", int64_t(1000)},
                              {"eval", false},
                              {"progress", std::string("none")},
                              {"log.level", std::string("warn")},
                              {"codec", c.codec},
                              {"transport", c.transport},
                              {"output.dir", output_dir}},
                             "loom scale --validate");
}

}  // namespace

Measured measure_case(const plan::RunPlan& run, const ValidationCase& c, int64_t steps,
                      const std::string& loom_path, const std::string& mpirun) {
  if (c.transport == "thread")
    return from_epochs(train::run_training(case_run(run, c, steps, "")).epochs);
  if (c.transport != "mpi")
    throw InputError(fmt::format("validate: transport '{}' (choose thread or mpi)", c.transport));
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("loom_validate_{}", ::getpid());
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "run.toml");
    out << case_run(run, c, steps, dir.string()).text;
  }
  const std::string cmd =
      fmt::format("{} -np {} '{}' train '{}' > '{}' 2>&1", mpirun, c.workers, loom_path,
                  (dir / "run.toml").string(), (dir / "log").string());
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir / "log");
    std::stringstream ss;
    ss << log.rdbuf();
    throw CommError(fmt::format("validate: `{}` failed:\n{}", cmd, ss.str()));
  }
  std::vector<train::EpochMetrics> epochs;
  const fs::path metrics = dir / "metrics.jsonl";
  std::ifstream in(metrics);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const auto parsed = train::parse_metrics_line(line, fmt::format("{}:{}", metrics.string(), n));
    if (!parsed) throw InputError(fmt::format("{}:{}: not a metrics line", metrics.string(), n));
    const nlohmann::json& j = *parsed;
    if (j.value("kind", "epoch") == "step") continue;
    train::EpochMetrics e;
    e.steps = j.at("steps");
    e.seconds = j.at("seconds");
    e.compute_s = j.at("compute_s");
    e.exposed_comm_s = j.at("exposed_comm_s");
    e.loader_wait_s = j.at("loader_wait_s");
    epochs.push_back(e);
  }
  fs::remove_all(dir);
  return from_epochs(epochs);
}

void merge_paired_rates(HostRates& host, const HostRates& before, const HostRates& after) {
  auto merge = [](auto& into, const auto& b, const auto& a) {
    for (const auto& [k, v] : b)
      if (auto it = a.find(k); it != a.end()) into[k] = (v + it->second) / 2;
  };
  merge(host.gemm_flops, before.gemm_flops, after.gemm_flops);
  merge(host.stream_bytes, before.stream_bytes, after.stream_bytes);
  merge(host.elementwise_bytes, before.elementwise_bytes, after.elementwise_bytes);
  if (host.cores == 0) host.cores = before.cores;
  for (const auto& [k, v] : before.busy_codec_gbs)
    if (auto it = after.busy_codec_gbs.find(k); it != after.busy_codec_gbs.end())
      host.busy_codec_gbs[k] = {(v.first + it->second.first) / 2,
                                (v.second + it->second.second) / 2};
  for (const auto& [k, v] : before.busy)
    if (auto it = after.busy.find(k); it != after.busy.end())
      host.busy[k] = {(v.alpha_s + it->second.alpha_s) / 2,
                      (v.bytes_per_s + it->second.bytes_per_s) / 2,
                      (v.steal + it->second.steal) / 2};
}

std::string validation_table(const std::vector<ValidationRow>& rows, double tolerance) {
  std::string out =
      fmt::format("{:<26} {:>10} {:>10} {:>8}   {:>27}   {:>20}\n", "run", "predicted", "measured",
                  "error", "predicted: gemm+ew/upd/comm", "measured: comp/comm");
  int missed = 0;
  for (const auto& r : rows) {
    const double err = r.error();
    const bool ok = within_tolerance(err, tolerance);
    missed += ok ? 0 : 1;
    const StepEstimate& p = r.predicted;
    out += fmt::format("{:<26} {:>10} {:>10} {:>+7.1f}%   {:>9} {:>8} {:>8}   {:>10} {:>9}  {}\n",
                       r.c.label(), format_seconds(p.step_s), format_seconds(r.measured.step_s),
                       100 * err, format_seconds(p.fwd_s + p.bwd_s), format_seconds(p.update_s),
                       format_seconds(p.comm_exposed_s), format_seconds(r.measured.compute_s),
                       format_seconds(r.measured.exposed_s), ok ? "ok" : "MISSED");
  }
  out += fmt::format("{} of {} runs outside +-{:.0f}%; load average (1, 5, 15 min): {}\n", missed,
                     rows.size(), 100 * tolerance, load_average());
  return out;
}

std::string validation_json(const std::vector<ValidationRow>& rows) {
  std::string out;
  for (const auto& r : rows) {
    nlohmann::json j = {{"bench", "validate"},
                        {"workers", r.c.workers},
                        {"codec", r.c.codec},
                        {"transport", r.c.transport},
                        {"steps", r.measured.steps},
                        {"predicted_step_s", r.predicted.step_s},
                        {"measured_step_s", r.measured.step_s},
                        {"error", r.error()},
                        {"predicted_compute_s", r.predicted.fwd_s + r.predicted.bwd_s},
                        {"predicted_update_s", r.predicted.update_s},
                        {"predicted_exposed_comm_s", r.predicted.comm_exposed_s},
                        {"measured_compute_s", r.measured.compute_s},
                        {"measured_exposed_comm_s", r.measured.exposed_s},
                        {"measured_loader_wait_s", r.measured.loader_wait_s},
                        {"load_average", load_average()}};
    out += j.dump() + "\n";
  }
  return out;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return "?";
  return fmt::format("{:.2f} {:.2f} {:.2f}", a, b, c);
}

}  // namespace loom::experiments
