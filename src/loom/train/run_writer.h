// A run's output directory: config.toml (the resolved config), metrics.jsonl (one JSON object
// per epoch, "kind": "epoch", and one every train.log_every steps, "kind": "step"), summary.json
// (the final figures), and tb/, a TensorBoard event file of the same figures
// (tensorboard_writer.h). Read back by `loom report`, the sweep, the perf model's validation and
// a resumed run; every metrics line and the summary carry "format_version" (docs/formats.md).
// A resumed run (train.resume) writes into the same directory and keeps the lines of the
// epochs its checkpoint had completed (keep_epochs_through), so the curves cover the whole run.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "loom/train/tensorboard_writer.h"

namespace loom::train {

// The folder of a run's TensorBoard event files, inside its output directory.
inline constexpr const char* kTensorBoardDir = "tb";

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
  // Creates the directory (InputError if it cannot) and a new event file in tb/. A new run
  // starts metrics.jsonl afresh; a resuming one leaves it for keep_epochs_through. Every failed
  // write below (a full disk) is an InputError naming the file: results are never left empty
  // without a word.
  void open();
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // config.toml, and the same text as TensorBoard's "config" text.
  void write_config(const std::string& canonical_text);
  // Adds "format_version" to the line. Every number of a line with an integer "step" (global
  // steps done) also becomes a TensorBoard scalar "<kind>/<field>" at that step ("epoch/val_acc",
  // "step/train_loss"), "step" and "format_version" aside. Both files are flushed at once.
  void append_metrics(const nlohmann::json& line);
  // Resume: drops the epoch lines after `epochs` and the step lines after `steps` (written
  // after the checkpoint, or a partial epoch, or a line cut short by a kill) and appends from
  // there. Atomic (temporary + rename). The new event file tells TensorBoard to drop what the
  // earlier ones hold from `steps` on, and holds the kept lines of step `steps` again.
  void keep_epochs_through(int64_t epochs, int64_t steps);
  // Written to a temporary file and renamed, so a reader never sees half a summary. Adds
  // "format_version". Flushes the event file.
  void write_summary(const nlohmann::json& summary);
  // The run's event file, for what is not a metrics line (weight histograms); null before
  // open() and when nothing is written.
  TensorBoardWriter* tensorboard() { return tb_ ? &*tb_ : nullptr; }

 private:
  std::string dir_;
  bool resuming_ = false;
  std::ofstream metrics_;
  // The line's numbers as TensorBoard scalars (append_metrics), when it has a "step".
  void log_scalars(const nlohmann::json& line);

  std::optional<TensorBoardWriter> tb_;
  int64_t tb_step_ = 0;  // the last step logged: where the config text goes
};

}  // namespace loom::train
