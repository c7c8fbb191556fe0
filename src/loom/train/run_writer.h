// A run's output directory: config.toml (the resolved config), metrics.jsonl (one JSON object
// per epoch, "kind": "epoch", and one every train.log_every steps, "kind": "step"), summary.json
// (the final figures). Read back by `loom report`, the sweep, the perf model's validation and a
// resumed run; every metrics line and the summary carry "format_version" (docs/formats.md).
// A resumed run (train.resume) writes into the same directory and keeps the lines of the
// epochs its checkpoint had completed (keep_epochs_through), so the curves cover the whole run.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace loom::train {

// The versions of the metrics.jsonl lines and of summary.json that this build writes and reads.
// Metrics version 2: epoch lines carry the validation split's val_loss and val_acc; the test
// set is not evaluated per epoch (version 1 lines have a per-epoch test_acc instead).
inline constexpr int64_t kMetricsFormatVersion = 2;
inline constexpr int64_t kSummaryFormatVersion = 1;

// Parses one metrics.jsonl line; `where` names the file and line. nullopt for a line that is
// not a JSON object with an "epoch" (cut short by a kill, or blank); InputError naming `where`
// for a line of a newer format version.
std::optional<nlohmann::json> parse_metrics_line(const std::string& line, const std::string& where);
// Checks a parsed summary.json: InputError naming `path` when it is of a newer format version.
void check_summary_version(const nlohmann::json& summary, const std::string& path);

class RunWriter {
 public:
  // An empty dir writes nothing. The disk is touched only by open(), once the run's config has
  // passed every check, so a run that fails a check leaves an earlier run's files as they were.
  explicit RunWriter(const std::string& dir, bool resuming = false);
  // Creates the directory (InputError if it cannot). A new run starts metrics.jsonl afresh; a
  // resuming one leaves it for keep_epochs_through. Every failed write below (a full disk) is
  // an InputError naming the file: results are never left empty without a word.
  void open();
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  void write_config(const std::string& canonical_text);
  // Adds "format_version" to the line.
  void append_metrics(const nlohmann::json& line);
  // Resume: drops the epoch lines after `epochs` and the step lines after `steps` (written
  // after the checkpoint, or a partial epoch, or a line cut short by a kill) and appends from
  // there. Atomic (temporary + rename).
  void keep_epochs_through(int64_t epochs, int64_t steps);
  // Written to a temporary file and renamed, so a reader never sees half a summary. Adds
  // "format_version".
  void write_summary(const nlohmann::json& summary);

 private:
  std::string dir_;
  bool resuming_ = false;
  std::ofstream metrics_;
};

}  // namespace loom::train
