// `loom report`: one self-contained HTML page over run directories: loss and accuracy curves,
// throughput, where a step's time goes (compute, exposed communication, loader stall), and a
// comparison of the runs (final accuracy, throughput, scaling with workers). The plots are
// inline SVG (core/svg_plot.h); the page needs no network and no scripts.
#pragma once

#include <string>
#include <vector>

#include "loom/experiments/report_data.h"

namespace loom::experiments {

struct ReportOptions {
  std::string title = "loom report";
  std::string generated;  // shown under the title ("2026-11-29 10:00"); empty = omitted
};

std::string render_report(const std::vector<RunData>& runs, const ReportOptions& options);

struct ReportOutcome {
  int64_t runs = 0;
  std::vector<std::string> problems;  // "runs/a: metrics.jsonl is missing: ..."
};
// Loads the runs, renders the page and writes it to out_path (temporary file, then rename).
ReportOutcome write_report(const std::vector<std::string>& dirs, const std::string& out_path,
                           const ReportOptions& options);

}  // namespace loom::experiments
