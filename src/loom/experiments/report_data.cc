#include "loom/experiments/report_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/train/run_writer.h"

namespace loom::experiments {

namespace fs = std::filesystem;

namespace {

// Keys that say where things are or how verbose, not what was trained.
const std::set<std::string> kNotLabels = {"output.dir",     "trace.file", "progress",
                                          "log.level",      "data.dir",   "train.resume",
                                          "train.log_every"};

bool is_run_dir(const fs::path& p) {
  return fs::exists(p / "metrics.jsonl") || fs::exists(p / "summary.json") ||
         fs::exists(p / "config.toml");
}

void read_config(RunData& run) {
  const fs::path path = fs::path(run.dir) / "config.toml";
  if (!fs::exists(path)) {
    run.problems.push_back("config.toml is missing: runs cannot be told apart by config");
    return;
  }
  try {
    const Config cfg = Config::from_file(path.string());
    for (const auto& [k, v] : cfg.values()) {
      if (v.is_array) {
        std::string s = "[";
        for (size_t i = 0; i < v.array.size(); ++i)
          s += (i ? ", " : "") + config_scalar_text(v.array[i]);
        run.config[k] = s + "]";
      } else {
        run.config[k] =
            v.value.index() == 3 ? std::get<std::string>(v.value) : config_scalar_text(v.value);
      }
    }
  } catch (const Error& e) {
    run.problems.push_back(fmt::format("config.toml is unreadable: {}", e.what()));
  }
}

void read_metrics(RunData& run) {
  const fs::path path = fs::path(run.dir) / "metrics.jsonl";
  std::ifstream in(path);
  if (!in) {
    run.problems.push_back("metrics.jsonl is missing: no curves for this run");
    return;
  }
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = train::parse_metrics_line(line, fmt::format("{}:{}", path.string(), n));
    if (j) {
      if (j->value("kind", "epoch") == "step")
        run.steps.push_back(std::move(*j));
      else
        run.epochs.push_back(std::move(*j));
    } else {
      run.problems.push_back(
          fmt::format("metrics.jsonl line {} is truncated or malformed "
                      "(skipped)",
                      n));
    }
  }
  if (n == 0) run.problems.push_back("metrics.jsonl is empty: the run stopped before epoch 1");
}

void read_summary(RunData& run) {
  const fs::path path = fs::path(run.dir) / "summary.json";
  std::ifstream in(path);
  if (!in) {
    run.problems.push_back("summary.json is missing: the run did not finish (or is running)");
    return;
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    run.problems.push_back("summary.json is truncated or malformed");
    return;
  }
  train::check_summary_version(j, path.string());
  run.summary = std::move(j);
}

}  // namespace

double RunData::last(const std::string& key, double def) const {
  if (epochs.empty()) return def;
  const auto& j = epochs.back();
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : def;
}

std::vector<RunData> load_runs(const std::vector<std::string>& dirs) {
  std::vector<fs::path> found;
  for (const auto& d : dirs) {
    const fs::path p(d);
    if (!fs::is_directory(p)) throw InputError(fmt::format("{}: no such run directory", d));
    if (is_run_dir(p)) {
      found.push_back(p);
      continue;
    }
    // A sweep (trials/t000, ...) or a folder of runs: take the run directories below it.
    std::vector<fs::path> below;
    for (const auto& sub : {p / "trials", p})
      if (fs::is_directory(sub))
        for (const auto& e : fs::directory_iterator(sub))
          if (e.is_directory() && is_run_dir(e.path())) below.push_back(e.path());
    if (below.empty())
      throw InputError(
          fmt::format("{}: not a run directory (no metrics.jsonl, summary.json or "
                      "config.toml) and no runs below it",
                      d));
    std::sort(below.begin(), below.end());
    found.insert(found.end(), below.begin(), below.end());
  }
  std::vector<RunData> runs;
  for (const auto& p : found) {
    RunData r;
    r.dir = p.string();
    r.name = p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
    read_config(r);
    read_metrics(r);
    read_summary(r);
    runs.push_back(std::move(r));
  }
  label_runs(runs);
  return runs;
}

void label_runs(std::vector<RunData>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs)
    for (const auto& [k, v] : r.config) keys.insert(k);
  std::vector<std::pair<size_t, std::string>> differing;  // (distinct values, key)
  for (const auto& k : keys) {
    if (kNotLabels.count(k)) continue;
    std::set<std::string> values;
    for (const auto& r : runs) {
      auto it = r.config.find(k);
      values.insert(it == r.config.end() ? std::string("(default)") : it->second);
    }
    if (values.size() > 1) differing.emplace_back(values.size(), k);
  }
  // The key with the most distinct values first (the swept one), so a shortened label still
  // tells the runs apart.
  std::stable_sort(differing.begin(), differing.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& r : runs) {
    r.label.clear();
    for (const auto& [n, k] : differing) {
      auto it = r.config.find(k);
      if (!r.label.empty()) r.label += ' ';
      r.label += k + "=" + (it == r.config.end() ? std::string("default") : it->second);
    }
  }
  // Names: the directory's, with as many parent folders as it takes to tell apart the runs
  // that share it (a/latest, b/latest); the full path where even that does not.
  std::vector<std::vector<std::string>> parts(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    fs::path p = fs::path(runs[i].dir).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    for (const auto& part : p) parts[i].push_back(part.string());
  }
  auto name_at = [&](size_t i, size_t depth) {
    std::string name;
    const std::vector<std::string>& ps = parts[i];
    for (size_t k = ps.size() > depth ? ps.size() - depth : 0; k < ps.size(); ++k)
      name += (name.empty() || name == "/" ? "" : "/") + ps[k];
    return name.empty() ? runs[i].dir : name;
  };
  std::vector<size_t> depth(runs.size(), 1);
  for (int round = 0; round < 16; ++round) {
    std::map<std::string, std::vector<size_t>> by_name;
    for (size_t i = 0; i < runs.size(); ++i) by_name[name_at(i, depth[i])].push_back(i);
    bool clash = false;
    for (const auto& [name, members] : by_name)
      if (members.size() > 1)
        for (size_t i : members) clash = true, ++depth[i];
    if (!clash) break;
  }
  for (size_t i = 0; i < runs.size(); ++i) runs[i].name = name_at(i, depth[i]);
}

std::string scaling_group(const RunData& run) {
  std::string key;
  for (const auto& [k, v] : run.config)
    if (k != "workers" && !kNotLabels.count(k)) key += k + "=" + v + "\n";
  return key;
}

}  // namespace loom::experiments
