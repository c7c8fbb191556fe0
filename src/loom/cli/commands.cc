#include "loom/cli/commands.h"

#include <map>

#include "loom/cli/version.h"

namespace loom::cli {
namespace {

std::map<std::string, CommandSetup>& registry() {
  static std::map<std::string, CommandSetup> commands;
  return commands;
}

int g_exit_code = 0;

}  // namespace

CommandRegistrar::CommandRegistrar(const std::string& name, CommandSetup setup) {
  registry()[name] = std::move(setup);
}

void set_exit_code(int code) {
  g_exit_code = code;
}

int run(int argc, char** argv) {
  CLI::App app{"loom: data-parallel neural network training"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the build's features");
  // "bench allreduce" registers under a "bench" parent that collects the benchmarks.
  for (auto& [name, setup] : registry()) {
    auto space = name.find(' ');
    if (space == std::string::npos) {
      setup(app);
      continue;
    }
    std::string parent = name.substr(0, space);
    CLI::App* group = nullptr;
    try {
      group = app.get_subcommand(parent);
    } catch (const CLI::OptionNotFound&) {
      group = app.add_subcommand(
          parent, parent == "bench" ? "benchmarks that print their figures" : parent + " commands");
      group->require_subcommand(1);
    }
    setup(*group);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (version) {
    print_version();
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return g_exit_code;
}

}  // namespace loom::cli
