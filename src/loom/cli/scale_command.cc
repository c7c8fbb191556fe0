// `loom scale`: registers the subcommand and its shared options, and runs the chosen mode
// (scale_command.h).
#include "loom/cli/scale_command.h"

#include <memory>

#include "loom/cli/commands.h"

namespace loom::cli::scale {

std::vector<std::string> split_list(const std::string& s) {
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

bool is_model_config(const std::string& workload) {
  return workload.size() > 5 && workload.substr(workload.size() - 5) == ".toml";
}

Config model_config(const std::string& workload) {
  return is_model_config(workload) ? Config::from_file(workload) : Config();
}

namespace {

struct ScaleArgs {
  CommonArgs common;
  PredictArgs predict;
  ParallelismArgs parallelism;
  ValidateArgs validate;
};

void add_common_options(CLI::App& cmd, CommonArgs& a) {
  add_workload_option(cmd, "--workload,-w", a.workload);
  cmd.add_option("--gpu,-g", a.gpu, "GPU name from the catalog (`loom hw list`)");
  cmd.add_option("--nodes", a.nodes, "machines")->check(CLI::PositiveNumber);
  add_gpus_per_node_option(cmd, a.gpus_per_node);
  cmd.add_option("--inter", a.inter, "link between machines");
  add_training_options(cmd, a.training);
  cmd.add_option("--derate", a.derate,
                 "achievable fraction of peak FLOP/s (default: a published rate of the GPU, else "
                 "the roofline at the median efficiency of the published rates, or calibration's)");
  add_catalog_options(cmd, a.catalog);
  cmd.add_flag("--json", a.json, "print JSON lines instead of tables");
}

void run(const ScaleArgs& a) {
  if (a.validate.chosen) return run_validate(a.common, a.validate);
  if (a.parallelism.chosen) return run_parallelism(a.common, a.parallelism);
  if (a.common.anchors) return run_anchors();
  run_predict(a.common, a.predict);
}

CommandRegistrar reg("scale", [](CLI::App& app) {
  auto a = std::make_shared<ScaleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "scale", "predict step time and speedup from 1 GPU to nodes x gpus-per-node");
  add_common_options(*cmd, a->common);
  add_predict_options(*cmd, a->predict);
  add_parallelism_options(*cmd, a->parallelism);
  add_anchors_option(*cmd, a->common.anchors);
  add_validate_options(*cmd, a->validate);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loom::cli::scale
