// `loom scale --anchors`: the published validation set against the model
// (perf/validation_set.h); exits non-zero when a case, or its leave-one-out prediction, misses.
#include <fmt/format.h>

#include "loom/cli/scale_command.h"
#include "loom/core/error.h"
#include "loom/perf/validation_set.h"

namespace loom::cli::scale {

void add_anchors_option(CLI::App& cmd, bool& anchors) {
  cmd.add_flag("--anchors", anchors,
               "print the published validation set against the model; exit 1 on a miss");
}

void run_anchors() {
  const perf::ValidationRun run = perf::run_validation();
  fmt::print("{}", perf::validation_report(run));
  if (!run.ok())
    throw Error(fmt::format("{} of {} published cases outside {:.0f}% ({} with leave-one-out)",
                            run.in_sample.misses, run.results.size(), 100 * perf::kPassMark,
                            run.loo.misses));
}

}  // namespace loom::cli::scale
