#include "loom/experiments/sweep_state.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/core/io/atomic_file.h"

namespace loom::experiments {

namespace fs = std::filesystem;

namespace {

nlohmann::json scalar_json(const ConfigScalar& v) {
  switch (v.index()) {
    case 0:
      return std::get<bool>(v);
    case 1:
      return std::get<int64_t>(v);
    case 2:
      return std::get<double>(v);
    default:
      return std::get<std::string>(v);
  }
}

ConfigScalar scalar_of(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number()) return j.get<double>();
  return j.get<std::string>();
}

TrialStatus status_of(const std::string& s) {
  if (s == "ok") return TrialStatus::kOk;
  if (s == "failed") return TrialStatus::kFailed;
  if (s == "running") return TrialStatus::kRunning;
  return TrialStatus::kPending;
}

}  // namespace

const char* trial_status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::kOk:
      return "ok";
    case TrialStatus::kFailed:
      return "failed";
    case TrialStatus::kRunning:
      return "running";
    default:
      return "pending";
  }
}

void save_sweep_state(const std::string& dir, const std::string& metric,
                      const std::vector<TrialRecord>& records) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json ov = nlohmann::json::array();
    for (const auto& [k, v] : r.trial.overrides) ov.push_back({k, scalar_json(v)});
    trials.push_back({{"index", r.trial.index},
                      {"name", r.trial.name},
                      {"key", r.trial.key()},
                      {"overrides", ov},
                      {"status", trial_status_name(r.status)},
                      {"exit_code", r.exit_code},
                      {"seconds", r.seconds},
                      {"slot", r.slot},
                      {"metric", r.metric ? nlohmann::json(*r.metric) : nlohmann::json()},
                      {"test_acc", r.test_acc},
                      {"samples_per_s", r.samples_per_s},
                      {"error", r.error}});
  }
  const nlohmann::json state = {
      {kFormatVersionKey, kSweepStateFormatVersion}, {"metric", metric}, {"trials", trials}};
  const fs::path path = fs::path(dir) / "state.json";
  core::write_file_atomically(path.string(), state.dump(1) + '\n');
}

std::vector<TrialRecord> load_sweep_state(const std::string& dir, std::string* metric) {
  const fs::path path = fs::path(dir) / "state.json";
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<TrialRecord> out;
  try {
    const nlohmann::json state = nlohmann::json::parse(ss.str());
    check_format_version(state, kSweepStateFormatVersion, "sweep state", path.string());
    if (metric)
      *metric = state.contains("metric") && state["metric"].is_string()
                    ? state["metric"].get<std::string>()
                    : std::string();
    for (const auto& t : state.at("trials")) {
      TrialRecord r;
      r.trial.index = t.at("index").get<int64_t>();
      r.trial.name = t.at("name").get<std::string>();
      for (const auto& kv : t.at("overrides"))
        r.trial.overrides.emplace_back(kv.at(0).get<std::string>(), scalar_of(kv.at(1)));
      r.status = status_of(t.at("status").get<std::string>());
      r.exit_code = t.value("exit_code", 0);
      r.seconds = t.value("seconds", 0.0);
      r.slot = t.value("slot", -1);
      if (t.contains("metric") && t["metric"].is_number()) r.metric = t["metric"].get<double>();
      r.test_acc = t.value("test_acc", -1.0);
      r.samples_per_s = t.value("samples_per_s", 0.0);
      r.error = t.value("error", std::string());
      out.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: corrupt sweep state ({}); delete it to start the sweep over",
                                 path.string(), e.what()));
  }
  return out;
}

}  // namespace loom::experiments
