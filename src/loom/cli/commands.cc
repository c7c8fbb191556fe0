#include "loom/cli/commands.h"

#include <CLI/CLI.hpp>

#include "loom/cli/version.h"

namespace loom::cli {

int run(int argc, char** argv) {
  CLI::App app{"loom: data-parallel neural network training"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the build's features");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (version) {
    print_version();
    return 0;
  }
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace loom::cli
