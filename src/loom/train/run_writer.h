// A run's output directory: config.toml (the resolved config), metrics.jsonl (one JSON object
// per epoch), summary.json (the final figures). Read back by `loom report` and the perf model.
// A resumed run (train.resume) writes into the same directory and keeps the lines of the
// epochs its checkpoint had completed (keep_epochs_through), so the curves cover the whole run.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace loom::train {

class RunWriter {
 public:
  // An empty dir writes nothing. Creates the directory; InputError if it cannot. A new run
  // starts metrics.jsonl afresh; a resuming one leaves it for keep_epochs_through.
  explicit RunWriter(const std::string& dir, bool resuming = false);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  void write_config(const std::string& canonical_text);
  void append_metrics(const nlohmann::json& line);
  // Resume: drops the lines of epochs after `epochs` (written after the checkpoint, or a partial
  // epoch, or a line cut short by a kill) and appends from there. Atomic (temporary + rename).
  void keep_epochs_through(int64_t epochs);
  // Written to a temporary file and renamed, so a reader never sees half a summary.
  void write_summary(const nlohmann::json& summary);

 private:
  std::string dir_;
  std::ofstream metrics_;
};

}  // namespace loom::train
