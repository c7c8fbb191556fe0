// `loom eval RUN [--checkpoint DIR] [--data PATH] [--json FILE] [--threads N]`: a trained
// run's final weights (or one of its checkpoints) on its config's test set or on another set:
// loss, accuracy and the confusion matrix (train/evaluation.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "loom/cli/commands.h"
#include "loom/cli/trained_run.h"
#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/core/io/atomic_file.h"
#include "loom/core/timer.h"
#include "loom/plan/saved_run.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/evaluation.h"
#include "loom/train/forward_settings.h"
#include "loom/train/trained_model.h"

namespace loom::cli::eval_command {
namespace {

namespace fs = std::filesystem;

// The version of `loom eval --json` output.
constexpr int64_t kEvalFormatVersion = 1;

struct EvalArgs {
  std::string run;
  std::string checkpoint;  // --checkpoint DIR
  std::string data;        // --data PATH
  std::string json;        // --json FILE
  bool force = false;      // --force: replace an existing --json FILE
  int threads = 0;         // 0: every core
};

void run_eval(const EvalArgs& args) {
  std::error_code ec;
  if (!fs::exists(args.run, ec))
    throw InputError(fmt::format("{}: no such run directory or model file", args.run));
  if (!args.json.empty() && fs::exists(args.json, ec) && !args.force)
    throw InputError(fmt::format(
        "{}: exists; loom eval does not replace earlier results unless --force is given",
        args.json));
  Backend& be = cpu_backend();
  const int threads = train::use_forward_threads(be, args.threads);
  train::TrainedModel m = train::load_trained_model(weights_path(args.run, args.checkpoint), be);
  // The weights from a checkpoint, the data from the run's config when the checkpoint has none
  // to say otherwise: a checkpoint carries its config, so this only fills in a model file's.
  if (!m.run && fs::is_regular_file(fs::path(args.run) / "config.toml", ec))
    m.run = plan::read_saved_run_file((fs::path(args.run) / "config.toml").string());
  std::string source;
  const data::Dataset set = train::load_eval_set(m, args.data, &source);
  Stopwatch watch;
  const train::EvalResult r = train::evaluate_model(*m.model, set);
  const double seconds = watch.seconds();
  fmt::print("loom eval: {}{} on {} ({} thread{}, {:.2f} s)\n", m.weights,
             m.steps >= 0 ? fmt::format(" ({} steps)", m.steps) : "", source, threads,
             threads == 1 ? "" : "s", seconds);
  fmt::print("{}", train::eval_text(r));
  if (!args.json.empty()) {
    nlohmann::json j = train::eval_json(r);
    j[kFormatVersionKey] = kEvalFormatVersion;
    j["weights"] = m.weights;
    j["data"] = source;
    j["steps"] = m.steps;
    core::write_file_atomically(args.json, j.dump(2) + "\n");
  }
}

CommandRegistrar reg("eval", [](CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "evaluate a trained run: loss, accuracy and confusion matrix on its test set");
  cmd->add_option("run", args->run,
                  "a run directory (its model.safetensors, else its newest checkpoint), a "
                  "checkpoint directory or a model file")
      ->required();
  cmd->add_option("--checkpoint", args->checkpoint,
                  "evaluate this checkpoint (a directory, or a step-N name under the run's "
                  "checkpoints/) instead of the final weights");
  cmd->add_option("--data", args->data,
                  "evaluate on this set instead of the config's test set: a shard file, or a "
                  "directory of IDX files (its t10k set)");
  cmd->add_option("--json", args->json, "also write the figures as JSON to FILE");
  cmd->add_flag("--force", args->force, "replace an existing --json FILE");
  cmd->add_option("--threads", args->threads, "threads for the forward (default: every core)")
      ->check(CLI::Range(1, 1024));
  cmd->callback([args] { run_eval(*args); });
});

}  // namespace
}  // namespace loom::cli::eval_command
