// `loom train [CONFIG.toml] [--set key=value ...]`
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/core/config.h"
#include "loom/core/log.h"
#include "loom/train/checkpoint.h"
#include "loom/train/train_config.h"
#include "loom/train/trainer.h"

namespace loom::cli {
namespace {

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> sets;
  bool help_config = false;
  std::string timeline;  // --timeline FILE: trace.file
  std::string resume;    // --resume DIR: train.resume (docs/reliability.md)
};

void run_train(const TrainArgs& args) {
  if (args.help_config) {
    fmt::print("loom train keys (TOML file and --set key=value):\n{}", train::config_help());
    return;
  }
  Config cfg = args.config_path.empty() ? Config() : Config::from_file(args.config_path);
  // --resume without a config file: the config saved in the newest checkpoint.
  if (!args.resume.empty() && args.config_path.empty()) {
    const std::string dir = train::find_latest_checkpoint(args.resume);
    cfg = Config::from_string(train::checkpoint_config_text(dir), dir + "/train.ckpt:config");
  }
  if (!args.resume.empty()) cfg.set("train.resume", args.resume, "--resume");
  for (const auto& s : args.sets) cfg.set_override(s);
  if (!args.timeline.empty()) cfg.set("trace.file", args.timeline, "--timeline");
  const train::TrainResult r = train::run_training(cfg);
  if (!r.epochs.empty())
    fmt::print(
        "loom: done: {} epochs, {} steps, test accuracy {:.4f}, {:.0f} samples/s "
        "({} worker{})\n",
        r.epochs.size(), r.steps, r.test_acc, r.samples_per_s, r.world, r.world == 1 ? "" : "s");
  if (r.interrupted)
    fmt::print("loom: stopped by a signal after step {}; checkpoint {}\n", r.steps,
               r.checkpoint.empty() ? std::string("not written") : r.checkpoint);
}

CommandRegistrar reg("train", [](CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a model (Fashion-MNIST by default)");
  cmd->add_option("config", args->config_path, "TOML config file")->check(CLI::ExistingFile);
  cmd->add_option("--resume", args->resume,
                  "resume from the newest complete checkpoint under DIR (a run's output.dir or "
                  "its checkpoints/)");
  cmd->add_option("--set", args->sets, "override a key: --set workers=2 --set optim.lr=0.1");
  cmd->add_option(
      "--timeline", args->timeline,
      "write a Chrome trace of the first trace.steps steps (Perfetto, chrome://tracing)");
  cmd->add_flag("--help-config", args->help_config, "list every config key with its default");
  cmd->callback([args] { run_train(*args); });
});

}  // namespace
}  // namespace loom::cli
