// `loom train [CONFIG.toml] [--set key=value ...]`
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/core/config.h"
#include "loom/core/log.h"
#include "loom/plan/run_keys.h"
#include "loom/train/checkpoint.h"
#include "loom/train/output_dir.h"
#include "loom/train/trainer.h"

namespace loom::cli::train_command {
namespace {

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> sets;
  bool help_config = false;
  std::string timeline;  // --timeline FILE: trace.file
  std::string resume;    // --resume DIR: train.resume (docs/reliability.md)
  bool force = false;    // --force: replace the run output.dir holds
  bool print_model = false;
};

std::string plural(int64_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

void run_train(const TrainArgs& args) {
  if (args.help_config) {
    fmt::print("loom train keys (TOML file and --set key=value):\n{}", plan::config_help());
    return;
  }
  Config cfg = args.config_path.empty() ? Config() : Config::from_file(args.config_path);
  // --resume without a config file: the config saved in the newest checkpoint.
  if (!args.resume.empty() && args.config_path.empty()) {
    const std::string dir = train::find_latest_checkpoint(args.resume);
    cfg = Config::from_string(train::checkpoint_config_text(dir), dir + "/train.ckpt:config");
  }
  if (!args.resume.empty()) {
    cfg.set("train.resume", args.resume, "--resume");
    // A resumed run writes into the run it was pointed at, wherever the run it was copied from
    // lies (the checkpoint's config names that one). Only an explicit --set may disagree, and
    // run_training refuses that.
    cfg.set("output.dir", train::resume_run_dir(args.resume), "--resume");
  }
  for (const auto& s : args.sets) cfg.set_override(s);
  if (!args.timeline.empty()) cfg.set("trace.file", args.timeline, "--timeline");
  train::TrainOptions options;
  options.force = args.force;
  options.print_model = args.print_model;
  const train::TrainResult r = train::run_training(plan::read_run_plan(cfg), options);
  if (!r.epochs.empty())
    fmt::print("loom: done: {}, {}, test accuracy {}{}{}, {:.0f} samples/s ({}){}\n",
               plural(r.epochs_done, "epoch"), plural(r.steps, "step"),
               r.test_acc >= 0 ? fmt::format("{:.4f}", r.test_acc)
                               : "not evaluated (eval = false, or no test set)",
               r.val_acc >= 0 ? fmt::format(", last val accuracy {:.4f}", r.val_acc) : "",
               r.best_epoch > 0 ? fmt::format(", best epoch {} (val accuracy {:.4f}, weights kept)",
                                              r.best_epoch, r.best_val_acc)
                                : "",
               r.samples_per_s, plural(r.world, "worker"),
               r.output_dir.empty() ? "" : fmt::format("; results in {}", r.output_dir));
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
                  "its checkpoints/), on its world size or another (the global batch kept)");
  cmd->add_option("--set", args->sets, "override a key: --set workers=2 --set optim.lr=0.1");
  cmd->add_option(
      "--timeline", args->timeline,
      "write a Chrome trace of the first trace.steps steps (Perfetto, chrome://tracing)");
  cmd->add_flag("--help-config", args->help_config, "list every config key with its default");
  cmd->add_flag("--print-model", args->print_model,
                "print the model's layers (name, type, inputs, output shape, parameters, "
                "forward MFLOP per sample) for the config's data, and stop");
  cmd->add_flag("--force", args->force,
                "replace the run that output.dir already holds (its config.toml, metrics.jsonl, "
                "summary.json and checkpoints/); without it such a run is never overwritten");
  cmd->callback([args] { run_train(*args); });
});

}  // namespace
}  // namespace loom::cli::train_command
