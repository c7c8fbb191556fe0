// `loom advise`: ranks GPU x count x link configurations for a model and a budget
// (perf/advisor.h).
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/perf/advisor.h"

namespace loom::cli {
namespace {

struct AdviseArgs {
  std::string model = "resnet50";
  double budget = 0;
  int max_gpus = 64, gpus_per_node = 8;
  double node_usd = 2000;
  std::vector<std::string> links, gpus, catalogs;
  int64_t batch = 0;
  std::string precision = "fp32", optimizer = "momentum";
  int top = 10;
  std::string calibration;
  double machine_usd = 0;
};

void setup(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "rank GPU configurations for a model and a budget");
  cmd->add_option("--model,-m", a->model, "loom model config (.toml) or a reference workload name")
      ->required();
  cmd->add_option("--budget", a->budget, "USD for GPUs and hosts")->required();
  cmd->add_option("--max-gpus", a->max_gpus, "largest GPU count to consider");
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs a machine holds");
  cmd->add_option("--node-usd", a->node_usd,
                  "price of one host machine without GPUs (default 2000, an assumption)");
  cmd->add_option("--link", a->links,
                  "links between machines to consider (default 10gbe, 100gbe, ib-hdr)");
  cmd->add_option("--gpu", a->gpus, "only these GPUs");
  cmd->add_option("--batch,-b", a->batch, "samples per GPU per step (default: the model's)");
  cmd->add_option("--precision", a->precision, "fp32 or mixed");
  cmd->add_option("--optimizer", a->optimizer, "sgd, momentum or adam");
  cmd->add_option("--catalog", a->catalogs, "extra catalog file(s) with your own rows");
  cmd->add_option("--top", a->top, "rows to show");
  cmd->add_option("--calibration", a->calibration,
                  "file written by `loom bench calibrate`: this machine joins the candidates as "
                  "'this-machine', predicted from its measured rates");
  cmd->add_option("--machine-usd", a->machine_usd,
                  "with --calibration: price of one more machine like this one (default: "
                  "--node-usd)");
  cmd->callback([a] {
    perf::Catalog cat = perf::Catalog::builtin();
    for (const auto& f : a->catalogs) cat.load_file(f);
    perf::AdviseRequest r;
    r.workload = perf::resolve_workload(a->model);
    r.budget_usd = a->budget;
    r.max_gpus = a->max_gpus;
    r.gpus_per_node = a->gpus_per_node;
    r.node_usd = a->node_usd;
    if (!a->links.empty()) r.inter_links = a->links;
    if (!a->calibration.empty())
      perf::use_calibration(perf::read_calibration(a->calibration), cat, r, a->machine_usd);
    r.gpus = a->gpus;
    r.train.batch = a->batch > 0 ? a->batch : r.workload.default_batch;
    r.train.precision = a->precision;
    r.train.optimizer = a->optimizer;
    perf::Advice adv = perf::advise(cat, r);
    fmt::print("{}", perf::advice_report(adv, r, static_cast<size_t>(a->top)));
  });
}

CommandRegistrar reg("advise", setup);

}  // namespace
}  // namespace loom::cli
