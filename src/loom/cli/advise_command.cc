// `loom advise`: ranks GPU x count x link configurations for a model and a budget
// (perf/advisor.h).
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/cli/perf_options.h"
#include "loom/perf/advisor.h"

namespace loom::cli {
namespace {

struct AdviseArgs {
  std::string model = "resnet50";
  double budget = 0;
  int max_gpus = 64, gpus_per_node = 8;
  double node_usd = 2000;
  std::vector<std::string> links, gpus;
  TrainingOptions training;
  CatalogOptions catalog;
  int top = 10;
  double machine_usd = 0;
};

void setup(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "rank GPU configurations for a model and a budget");
  add_workload_option(*cmd, "--model,-m", a->model)->required();
  cmd->add_option("--budget", a->budget, "USD for GPUs and hosts")->required();
  cmd->add_option("--max-gpus", a->max_gpus, "largest GPU count to consider");
  add_gpus_per_node_option(*cmd, a->gpus_per_node);
  cmd->add_option("--node-usd", a->node_usd,
                  "price of one host machine without GPUs (default 2000, an assumption)");
  cmd->add_option("--link", a->links,
                  "links between machines to consider (default 10gbe, 100gbe, ib-hdr)");
  cmd->add_option("--gpu", a->gpus, "only these GPUs");
  add_training_options(*cmd, a->training);
  add_catalog_options(*cmd, a->catalog);
  cmd->add_option("--top", a->top, "rows to show");
  cmd->add_option("--machine-usd", a->machine_usd,
                  "with --calibration: price of one more machine like this one (default: "
                  "--node-usd)");
  cmd->callback([a] {
    perf::Catalog cat = a->catalog.load();
    perf::AdviseRequest r;
    r.workload = perf::resolve_workload(a->model);
    r.budget_usd = a->budget;
    r.max_gpus = a->max_gpus;
    r.gpus_per_node = a->gpus_per_node;
    r.node_usd = a->node_usd;
    if (!a->links.empty()) r.inter_links = a->links;
    if (!a->catalog.calibration.empty())
      perf::use_calibration(perf::read_calibration(a->catalog.calibration), cat, r, a->machine_usd);
    r.gpus = a->gpus;
    r.train = a->training.spec(r.workload);
    perf::Advice adv = perf::advise(cat, r);
    fmt::print("{}", perf::advice_report(adv, r, static_cast<size_t>(a->top)));
  });
}

CommandRegistrar reg("advise", setup);

}  // namespace
}  // namespace loom::cli
