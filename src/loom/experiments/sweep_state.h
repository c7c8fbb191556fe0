// The state of a sweep on disk (<dir>/state.json): one record per trial, rewritten atomically
// (temporary file, then rename) after every change, so an interrupted sweep resumes where it
// stopped and a reader never sees half a file. The file carries "format_version"
// (docs/formats.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/experiments/sweep_spec.h"

namespace loom::experiments {

enum class TrialStatus { kPending, kRunning, kOk, kFailed };
const char* trial_status_name(TrialStatus s);

struct TrialRecord {
  Trial trial;
  TrialStatus status = TrialStatus::kPending;
  int exit_code = 0;             // of `loom train`; 128 + N when killed by signal N
  double seconds = 0;            // wall time of the child
  int slot = -1;                 // device slot it ran on
  std::optional<double> metric;  // the sweep's metric, when the run wrote it
  double test_acc = -1, samples_per_s = 0;
  std::string error;  // why it failed: exit code and the last lines of stderr
  bool finished() const { return status == TrialStatus::kOk || status == TrialStatus::kFailed; }
};

// The version of state.json that this build writes and reads.
inline constexpr int64_t kSweepStateFormatVersion = 1;

// Writes <dir>/state.json atomically. InputError if it cannot.
void save_sweep_state(const std::string& dir, const std::string& metric,
                      const std::vector<TrialRecord>& records);
// Records read back; empty when there is no state file. A corrupt file, or one of a newer
// format version, is an InputError that names it (delete it to start over). `metric`, when
// not null, receives the metric the records were ranked by ("" when the file has none).
std::vector<TrialRecord> load_sweep_state(const std::string& dir, std::string* metric = nullptr);

}  // namespace loom::experiments
