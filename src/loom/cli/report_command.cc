// `loom report RUN_DIR... [-o report.html] [--title TEXT]`
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

#include "loom/cli/commands.h"
#include "loom/experiments/report_html.h"

namespace loom::cli::report_command {
namespace {

struct ReportArgs {
  std::vector<std::string> dirs;
  std::string out = "report.html";
  std::string title = "loom report";
};

void run_report(const ReportArgs& args) {
  experiments::ReportOptions opts;
  opts.title = args.title;
  const std::time_t now = std::time(nullptr);
  opts.generated = fmt::format("{:%Y-%m-%d %H:%M}", fmt::localtime(now));
  const experiments::ReportOutcome out = experiments::write_report(args.dirs, args.out, opts);
  for (const auto& p : out.problems) fmt::print(stderr, "loom report: warning: {}\n", p);
  fmt::print("loom report: {} run{} -> {}\n", out.runs, out.runs == 1 ? "" : "s", args.out);
}

CommandRegistrar reg("report", [](CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "write one self-contained HTML page of plots over run (or sweep) directories");
  cmd->add_option("runs", args->dirs, "run directories (output.dir of `loom train`) or sweeps")
      ->required();
  cmd->add_option("-o,--output", args->out, "the HTML file to write (default report.html)");
  cmd->add_option("--title", args->title, "the page's title");
  cmd->callback([args] { run_report(*args); });
});

}  // namespace
}  // namespace loom::cli::report_command
