// `loom scale --anchors`: the published scaling results against the model (perf/anchors.h).
#include <fmt/format.h>

#include "loom/cli/scale_command.h"
#include "loom/perf/anchors.h"

namespace loom::cli::scale {

void add_anchors_option(CLI::App& cmd, bool& anchors) {
  cmd.add_flag("--anchors", anchors, "print the published anchors against the model and exit");
}

void run_anchors() {
  fmt::print("{}", perf::anchors_report());
}

}  // namespace loom::cli::scale
