// A run's output directory: config.toml (the resolved config), metrics.jsonl (one JSON object
// per epoch), summary.json (the final figures). Read back by `loom report` and the perf model.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace loom::train {

class RunWriter {
 public:
  // An empty dir writes nothing. Creates the directory; InputError if it cannot.
  explicit RunWriter(const std::string& dir);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  void write_config(const std::string& canonical_text);
  void append_metrics(const nlohmann::json& line);
  // Written to a temporary file and renamed, so a reader never sees half a summary.
  void write_summary(const nlohmann::json& summary);

 private:
  std::string dir_;
  std::ofstream metrics_;
};

}  // namespace loom::train
