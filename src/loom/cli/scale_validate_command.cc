// `loom scale --validate`: runs real loom jobs here and prints the model's prediction against
// each (perf/validate.h). The calibration is --calibration's, or measured now on the thread
// transport.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "loom/cli/scale_command.h"
#include "loom/core/error.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/calibration.h"
#include "loom/perf/validation_set.h"

namespace loom::cli::scale {
namespace {

// One run to make: the case and the launcher line of its MPI ranks.
struct Planned {
  experiments::ValidationCase c;
  std::string mpirun;
};

experiments::ValidationCase parse_case(const std::string& spec, const std::string& transport) {
  experiments::ValidationCase c;
  const size_t colon = spec.find(':');
  if (colon == std::string::npos)
    throw InputError(fmt::format("--cases '{}': write WORKERS:CODEC, e.g. 2:onebit", spec));
  c.workers = std::stoi(spec.substr(0, colon));
  c.codec = spec.substr(colon + 1);
  c.transport = transport;
  return c;
}

std::vector<Planned> plan_runs(const ValidateArgs& a) {
  std::vector<Planned> plan;
  for (const auto& transport : split_list(a.transports))
    for (const auto& spec :
         split_list(transport == "mpi" && !a.mpi_cases.empty() ? a.mpi_cases : a.cases))
      plan.push_back({parse_case(spec, transport), a.mpirun});
  if (!a.shaped_mpirun.empty())
    for (const auto& spec : split_list(a.shaped_cases)) {
      Planned p{parse_case(spec, "mpi"), a.shaped_mpirun};
      p.c.link_gbps = a.shaped_gbps;
      plan.push_back(p);
    }
  return plan;
}

perf::Calibration calibration(const std::string& file) {
  if (!file.empty()) return perf::read_calibration(file);
  fmt::print("# no --calibration FILE: measuring this machine now (loom bench calibrate)\n");
  std::string lines;
  measure::probe_machine(measure::ProbeOptions{}, nullptr,
                         [&](const nlohmann::json& j) { lines += j.dump() + "\n"; });
  return perf::parse_calibration(lines, "calibration measured now");
}

}  // namespace

void add_validate_options(CLI::App& cmd, ValidateArgs& a) {
  cmd.add_flag("--validate", a.chosen,
               "run real loom jobs here (workload: a loom config .toml, or the default MLP) and "
               "print predicted against measured step time");
  cmd.add_option("--steps", a.steps, "training steps per validation run")
      ->check(CLI::Range(10, 100000));
  cmd.add_option("--cases", a.cases, "validation runs, WORKERS:CODEC comma-separated");
  cmd.add_option("--transports", a.transports,
                 "thread and/or mpi (mpi: runs mpirun, needs mpi allreduce lines in the "
                 "calibration)");
  cmd.add_option("--tolerance", a.tolerance, "pass mark for the error, percent");
  cmd.add_option("--repeats", a.repeats, "runs of each case")->check(CLI::Range(1, 20));
  cmd.add_flag("--no-paired", a.no_paired,
               "predict from the calibration alone (default: GEMM, a += b and elementwise "
               "rates re-measured right before and after each run, averaged)");
  cmd.add_option("--shaped-mpirun", a.shaped_mpirun,
                 "launcher line for MPI ranks on a shaped link (bench/netns/validate.sh "
                 "passes one): adds the --shaped-cases, predicted for a --shaped-gbps link");
  cmd.add_option("--mpi-cases", a.mpi_cases,
                 "runs for the mpi transport, WORKERS:CODEC (default: --cases)");
  cmd.add_option("--shaped-cases", a.shaped_cases, "shaped-link runs, WORKERS:CODEC");
  cmd.add_option("--shaped-gbps", a.shaped_gbps, "the shaped link's rate, Gbit/s")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--mpirun", a.mpirun,
                 "launcher line for mpi cases (a script running ranks in network namespaces "
                 "passes its own)");
}

void run_validate(const CommonArgs& common, const ValidateArgs& a) {
  const Config cfg = model_config(common.workload);
  const plan::RunPlan run = plan::read_run_plan(cfg);
  const perf::Calibration cal = calibration(common.catalog.calibration);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<experiments::ValidationRow> rows;
  const measure::ProbeOptions po = mlp_probe_options(cfg);  // opens the config's data once
  for (const auto& [c, mpirun] : plan_runs(a)) {
    for (int rep = 0; rep < a.repeats; ++rep) {
      fmt::print("# running {} ({} steps) ...\n", c.label(), a.steps);
      std::fflush(stdout);
      // Paired calibration: the host rates measured right before and after the run replace
      // the calibration's for its shapes.
      perf::Calibration now = cal;
      const int threads = int(run.settings.threads);
      const bool paired = !a.no_paired;
      const perf::HostRates before =
          paired ? measure::probe_run_rates(po, c.workers, threads, c.codec) : perf::HostRates{};
      experiments::ValidationRow r;
      r.c = c;
      r.measured = experiments::measure_case(run, c, a.steps, self, mpirun);
      if (paired) {
        const perf::HostRates after = measure::probe_run_rates(po, c.workers, threads, c.codec);
        experiments::merge_paired_rates(now.host, before, after);
      }
      r.predicted = experiments::predict_case(run, now, c);
      rows.push_back(r);
    }
  }
  fmt::print(
      "\nloom scale --validate: predicted against measured step time ({}; calibration: "
      "{})\n\n{}\n{}",
      is_model_config(common.workload) ? common.workload : "default MLP config", cal.file,
      experiments::validation_table(rows, a.tolerance / 100), experiments::validation_json(rows));
  // With --anchors, one command prints both tables (the published set reports its misses in
  // its table: it keeps every case it was ever checked on).
  if (common.anchors) fmt::print("\n{}", perf::validation_report(perf::builtin_validation()));
  // A run of this machine outside the tolerance fails the command.
  int missed = 0;
  for (const auto& r : rows)
    missed += experiments::within_tolerance(r.error(), a.tolerance / 100) ? 0 : 1;
  if (missed > 0)
    throw Error(fmt::format("{} of {} runs outside {:.0f}%", missed, rows.size(), a.tolerance));
}

}  // namespace loom::cli::scale
