// `loom`: parses the command line, then calls the layers. Errors become exit codes here only.
#include <cstdio>

#include "loom/cli/commands.h"
#include "loom/core/error.h"

int main(int argc, char** argv) {
  try {
    return loom::cli::run(argc, argv);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: internal error: %s\n", e.what());
    return 1;
  }
}
