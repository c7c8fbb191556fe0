// `loom advise`: ranks the machines a budget buys (GPU x count x host class x link) and cloud
// rentals for a model, with their capital, energy and total cost (perf/advisor.h).
#include <fmt/format.h>

#include <algorithm>

#include "loom/cli/advise_run.h"
#include "loom/cli/commands.h"
#include "loom/cli/perf_options.h"
#include "loom/experiments/workloads.h"
#include "loom/perf/advisor.h"

namespace loom::cli::advise_command {
namespace {

struct AdviseArgs {
  std::string model = "resnet50";
  double budget = 0;
  int max_gpus = 64, gpus_per_node = 8;
  std::vector<std::string> links, gpus, hosts;
  double hours = perf::kDefaultHours, usd_per_kwh = perf::kDefaultUsdPerKwh;
  double gpu_utilisation = perf::kDefaultGpuUtilisation, samples = 0;
  std::string rank_by = "time";
  bool no_cloud = false;
  TrainingOptions training;
  CatalogOptions catalog;
  int top = 10;
  double machine_usd = 0;
  bool json = false;
  AdviseRunArgs run;
};

void setup(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "rank GPU configurations for a model and a budget");
  CLI::Option* model = add_workload_option(*cmd, "--model,-m", a->model);
  CLI::Option* budget = cmd->add_option(
      "--budget", a->budget, "USD for the machines (GPUs and hosts), or for the rent over --hours");
  CLI::Option* run = cmd->add_option("--run", a->run.config,
                                     "what codec/sync = \"auto\" would choose for this run "
                                     "config on this machine, and why (no --model/--budget)")
                         ->check(CLI::ExistingFile);
  cmd->add_option("--set", a->run.sets, "with --run: KEY=VALUE, as `loom train --set`");
  cmd->add_option("--calibration-mismatch", a->run.mismatch,
                  "with --run --calibration: a file from another machine is an \"error\" "
                  "(default) or loom warns and \"measure\"s instead")
      ->check(CLI::IsMember({"error", "measure"}));
  cmd->add_option("--max-gpus", a->max_gpus, "largest GPU count to consider");
  add_gpus_per_node_option(*cmd, a->gpus_per_node);
  cmd->add_option("--host", a->hosts,
                  "only these host classes (default: every one in the catalog; `loom hw list`)");
  cmd->add_option("--hours", a->hours,
                  "hours of training the hardware runs for: its life, or one run (default 8760, "
                  "a year)");
  cmd->add_option("--usd-per-kwh", a->usd_per_kwh,
                  "electricity price (default 0.1252: US commercial average, EIA, March 2023)");
  cmd->add_option("--gpu-utilisation", a->gpu_utilisation,
                  "GPUs' average draw as a share of TDP (default 0.76: an 8-GPU H100 node "
                  "training, Newkirk et al. 2025)");
  cmd->add_option("--samples", a->samples,
                  "samples to train, for the time column (default: the model's published run)");
  cmd->add_option("--rank-by", a->rank_by,
                  "time (samples/s), capital (samples/s per $1k) or total (samples per dollar "
                  "of capital and energy over --hours)")
      ->check(CLI::IsMember({"time", "capital", "total"}));
  cmd->add_flag("--no-cloud", a->no_cloud, "leave out the cloud rental rows");
  cmd->add_option("--link", a->links,
                  "links between machines to consider (default 10gbe, 100gbe, ib-hdr)");
  cmd->add_option("--gpu", a->gpus, "only these GPUs");
  add_training_options(*cmd, a->training, /*what_loom_runs=*/true);
  add_catalog_options(*cmd, a->catalog);
  cmd->add_option("--top", a->top, "rows to show");
  cmd->add_flag("--json", a->json, "print the advice as one JSON object instead of tables");
  cmd->add_option("--machine-usd", a->machine_usd,
                  "with --calibration: price of one more machine like this one (required)");
  cmd->callback([a, model, budget, run] {
    if (run->count() > 0) {
      a->run.calibration = a->catalog.calibration;
      advise_run(a->run);
      return;
    }
    if (model->count() == 0) throw CLI::RequiredError("--model (or --run)");
    if (budget->count() == 0) throw CLI::RequiredError("--budget");
    perf::Catalog cat = a->catalog.load();
    perf::AdviseRequest r;
    r.workload = experiments::resolve_workload(a->model);
    r.budget_usd = a->budget;
    r.max_gpus = a->max_gpus;
    r.gpus_per_node = a->gpus_per_node;
    r.hosts = a->hosts;
    r.hours = a->hours;
    r.usd_per_kwh = a->usd_per_kwh;
    r.gpu_utilisation = a->gpu_utilisation;
    r.samples = a->samples;
    r.rank_by = a->rank_by;
    r.cloud = !a->no_cloud;
    if (!a->links.empty()) r.inter_links = a->links;
    if (!a->catalog.calibration.empty())
      perf::use_calibration(perf::read_calibration(a->catalog.calibration), cat, r, a->machine_usd);
    r.gpus = a->gpus;
    r.train = a->training.spec(r.workload);
    perf::Advice adv = perf::advise(cat, r);
    if (a->json)
      fmt::print("{}\n",
                 perf::advice_json(adv, r, static_cast<size_t>(std::max(a->top, 0))).dump());
    else
      fmt::print("{}", perf::advice_report(adv, r, cat, static_cast<size_t>(a->top)));
  });
}

CommandRegistrar reg("advise", setup);

}  // namespace
}  // namespace loom::cli::advise_command
