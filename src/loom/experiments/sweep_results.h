// A sweep's results: trials ranked by the chosen metric, as a terminal table and a CSV file.
#pragma once

#include <string>
#include <vector>

#include "loom/experiments/sweep_spec.h"
#include "loom/experiments/sweep_state.h"

namespace loom::experiments {

// Best first by the metric (max or min as the spec says); trials without a metric (failed,
// pending, or a run that did not write it) follow in trial order.
std::vector<TrialRecord> rank_trials(const SweepSpec& spec, std::vector<TrialRecord> records);

// A line saying what ranks the trials (the metric, on which split), then a fixed-width table:
// rank, trial, status, one column per swept key, the metric, test accuracy (shown, never
// ranked), samples/s, seconds, and the first line of the error for failed trials.
std::string results_table(const SweepSpec& spec, const std::vector<TrialRecord>& ranked);
// The same as CSV (RFC 4180 quoting), with the whole error text. Written to `path`.
void write_results_csv(const SweepSpec& spec, const std::vector<TrialRecord>& ranked,
                       const std::string& path);

}  // namespace loom::experiments
