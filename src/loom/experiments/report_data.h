// What `loom report` reads from run directories (run_writer.h): config.toml, metrics.jsonl
// and summary.json. A missing or truncated file is not an error: the run keeps what could be
// read, and `problems` says in words what was missing, so the page draws what it can. A file of
// a newer format version (docs/formats.md) is: its fields cannot be known.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace loom::experiments {

struct RunData {
  std::string dir;
  // The directory's name ("t003", "latest"), with as many parent folders as it takes to tell
  // the runs apart ("a/latest", "b/latest"): what charts and tables call the run.
  std::string name;
  // The config keys that differ between the runs: "codec=int8 workers=2". Shown in a table
  // column and tooltips, never as the name (with many runs it grows unreadable).
  std::string label;
  std::map<std::string, std::string> config;  // key -> value as written (strings unquoted)
  std::vector<nlohmann::json> epochs;  // metrics.jsonl's epoch lines ("kind" "epoch" or none)
  std::vector<nlohmann::json> steps;   // its step lines ("kind" "step", train.log_every)
  std::optional<nlohmann::json> summary;
  std::vector<std::string> problems;
  std::string display() const { return name; }
  // A number from the last epoch, else `def`.
  double last(const std::string& key, double def = 0) const;
};

// Reads the runs. A directory that holds no metrics.jsonl but has run directories below it (a
// sweep's trials/ or a folder of runs) stands for those runs. InputError when a path does not
// exist at all, no run could be found in it, or a metrics line or summary is of a newer format
// version (naming the file).
std::vector<RunData> load_runs(const std::vector<std::string>& dirs);

// Sets each run's label from the config keys whose values differ between the runs (keys that
// only name places, like output.dir, left out), and makes the names unique.
void label_runs(std::vector<RunData>& runs);

// The run's config without `workers` and the keys that only name places: runs with the same
// one differ in their worker count alone, so they belong on one scaling line.
std::string scaling_group(const RunData& run);

}  // namespace loom::experiments
