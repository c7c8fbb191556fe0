// `loom sweep SWEEP.toml [--slots N] [--retry-failed] [--list]`
#include <fmt/format.h>

#include <filesystem>

#include "loom/cli/commands.h"
#include "loom/core/log.h"
#include "loom/experiments/sweep_results.h"
#include "loom/experiments/sweep_runner.h"
#include "loom/experiments/sweep_spec.h"

namespace loom::cli::sweep_command {
namespace {

struct SweepArgs {
  std::string path;
  int64_t slots = 0;
  bool retry_failed = false, list = false;
};

void run_sweep_command(const SweepArgs& args) {
  const experiments::SweepSpec spec = experiments::load_sweep(args.path);
  fmt::print("loom sweep: trials ranked by {}{}\n", spec.metric,
             spec.validation_added
                 ? fmt::format(", each holding out data.validation = {} of its training data "
                               "(set data.validation to choose another split)",
                               experiments::kSweepValidation)
                 : "");
  if (args.list) {
    for (const auto& t : experiments::expand_trials(spec)) fmt::print("{}  {}\n", t.name, t.key());
    return;
  }
  experiments::SweepRunOptions opts;
  opts.slots = args.slots;
  opts.retry_failed = args.retry_failed;
  opts.log = [](const std::string& s) { fmt::print("{}\n", s), std::fflush(stdout); };
  const experiments::SweepOutcome out = experiments::run_sweep(spec, opts);
  const auto ranked = experiments::rank_trials(spec, out.records);
  const std::string csv = (std::filesystem::path(spec.dir) / "results.csv").string();
  experiments::write_results_csv(spec, ranked, csv);
  int64_t failed = 0;
  for (const auto& r : out.records) failed += r.status == experiments::TrialStatus::kFailed;
  fmt::print(
      "\n{}\nloom sweep: {} trials ({} run now, {} from an earlier run, {} failed) in "
      "{:.1f} s on {} slots; results in {}\n",
      experiments::results_table(spec, ranked), out.records.size(), out.ran, out.skipped, failed,
      out.seconds, out.slots, csv);
  // Failed trials are results of the sweep, not errors of it: the exit code stays 0.
}

CommandRegistrar reg("sweep", [](CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "run a grid or random search of `loom train` trials, one per device slot");
  cmd->add_option("sweep", args->path, "sweep file (TOML, see docs/sweep.md)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--slots", args->slots, "trials at once (overrides the file's slots)");
  cmd->add_flag("--retry-failed", args->retry_failed, "rerun trials recorded as failed");
  cmd->add_flag("--list", args->list, "print the trials and exit");
  cmd->callback([args] { run_sweep_command(*args); });
});

}  // namespace
}  // namespace loom::cli::sweep_command
