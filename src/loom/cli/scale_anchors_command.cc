// `loom scale --anchors`: the published validation set against the model, with each case's
// leave-one-source-out error (perf/validation_set.h). The set keeps the cases the model misses
// (docs/perf.md, the protocol), so a miss is reported in the table, not as a failure.
#include <fmt/format.h>

#include "loom/cli/scale_command.h"
#include "loom/perf/validation_set.h"

namespace loom::cli::scale {

void add_anchors_option(CLI::App& cmd, bool& anchors) {
  cmd.add_flag("--anchors", anchors,
               "print the published validation set against the model, each case with its "
               "leave-one-source-out error, and the bands by GPU generation and precision");
}

void run_anchors() {
  fmt::print("{}", perf::validation_report(perf::builtin_validation()));
}

}  // namespace loom::cli::scale
