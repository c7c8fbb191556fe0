#include "loom/experiments/sweep_spec.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/plan/run_keys.h"

namespace loom::experiments {

namespace fs = std::filesystem;

namespace {

const std::vector<ConfigKeySpec>& sweep_own_keys() {
  static const std::vector<ConfigKeySpec> keys = {
      {"base", ConfigType::kString, "\"\"", "base config file"},
      {"mode", ConfigType::kString, "\"grid\"", "grid or random"},
      {"metric", ConfigType::kString, "\"val_acc\"",
       "ranks the trials (a validation figure or a speed, never a test figure)"},
      {"goal", ConfigType::kString, "\"max\"", "max or min"},
      {"trials", ConfigType::kInt, "0", "random mode: how many draws"},
      {"seed", ConfigType::kInt, "0", "random mode: seed of the draws"},
      {"slots", ConfigType::kInt, "0", "trials at once"},
      {"cores_per_slot", ConfigType::kInt, "1", "CPU cores per trial"},
      {"gpus", ConfigType::kArray, "[]", "GPU slots"},
      {"dir", ConfigType::kString, "\"sweeps/<name>\"", "output directory"},
      {"timeout_s", ConfigType::kDouble, "0", "kill a trial after this long"},
      {"set.", ConfigType::kString, "", "fixed overrides"},
      {"grid.", ConfigType::kArray, "", "swept keys"},
      {"uniform.", ConfigType::kArray, "", "random mode ranges"},
      {"log_uniform.", ConfigType::kArray, "", "random mode log ranges"},
  };
  return keys;
}

// Keys a trial may not set: the sweep owns where each trial writes.
const std::set<std::string> kOwnedBySweep = {"output.dir"};

// Checks that the train-config keys (prefix stripped) exist, naming the sweep file's line.
void check_train_keys(const Config& cfg, const std::string& section) {
  Config sub;
  const std::string prefix = section + ".";
  for (const auto& [key, v] : cfg.values()) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string k = key.substr(prefix.size());
    if (kOwnedBySweep.count(k))
      throw ConfigError(
          fmt::format("{}: key '{}': the sweep sets {} for each trial (use `dir` "
                      "for the sweep's directory)",
                      v.where, key, k));
    Config one;
    one.set(k, ConfigScalar(int64_t(0)), v.where);
    try {
      one.check_known(plan::train_config_keys());
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("[{}]: {}", section, e.what()));
    }
  }
}

double as_number(const ConfigScalar& s, const std::string& where, const std::string& key) {
  if (s.index() == 1) return double(std::get<int64_t>(s));
  if (s.index() == 2) return std::get<double>(s);
  throw ConfigError(fmt::format("{}: key '{}': expected numbers [lo, hi], found {}", where, key,
                                config_scalar_text(s)));
}

std::vector<SweepRange> read_ranges(const Config& cfg, const std::string& section, bool log) {
  std::vector<SweepRange> out;
  const std::string prefix = section + ".";
  for (const auto& [key, v] : cfg.values()) {
    if (key.rfind(prefix, 0) != 0) continue;
    if (!v.is_array || v.array.size() != 2)
      throw ConfigError(fmt::format("{}: key '{}': expected a range [lo, hi]", v.where, key));
    SweepRange r;
    r.key = key.substr(prefix.size());
    r.lo = as_number(v.array[0], v.where, key);
    r.hi = as_number(v.array[1], v.where, key);
    r.integer = v.array[0].index() == 1 && v.array[1].index() == 1;
    r.log = log;
    if (!(r.lo <= r.hi) || (log && r.lo <= 0))
      throw ConfigError(fmt::format("{}: key '{}': range [{}, {}] is empty{}", v.where, key, r.lo,
                                    r.hi, log ? " or not positive (log_uniform)" : ""));
    out.push_back(r);
  }
  return out;
}

// A draw rounded to 4 significant digits, so trial names and CSV cells stay readable.
ConfigScalar draw(const SweepRange& r, Rng& rng) {
  const double u = double(rng.next_u64() >> 11) * 0x1.0p-53;
  double x = r.log ? std::exp(std::log(r.lo) + u * (std::log(r.hi) - std::log(r.lo)))
                   : r.lo + u * (r.hi - r.lo);
  if (r.integer) return ConfigScalar(int64_t(std::llround(std::min(x, r.hi))));
  return ConfigScalar(std::stod(fmt::format("{:.4g}", x)));
}

// A value of data.validation that holds nothing out (0), from a config or a [set] line.
bool holds_nothing_out(const ConfigScalar& v) {
  return (v.index() == 1 && std::get<int64_t>(v) == 0) ||
         (v.index() == 2 && std::get<double>(v) == 0);
}

// The metric is a validation figure: every trial must hold a validation split out. Where
// neither the sweep nor its base config says how, the sweep holds out kSweepValidation; one
// that sets data.validation = 0 would leave the trials without the metric, which is refused.
void ensure_validation(SweepSpec& s) {
  for (const auto& [k, text] : s.fixed)
    if (k == "data.validation") {
      const Config one = Config::from_string("v = " + text, "[set]");
      if (holds_nothing_out(one.values().at("v").value))
        throw ConfigError(fmt::format(
            "{}: [set] data.validation = 0 leaves the trials without the metric '{}': hold "
            "out a fraction (e.g. 0.1) or rank by another metric",
            s.path, s.metric));
      return;
    }
  for (const auto& [k, values] : s.grid)
    if (k == "data.validation") {
      for (const auto& v : values)
        if (holds_nothing_out(v))
          throw ConfigError(fmt::format(
              "{}: [grid] data.validation holds 0, which leaves a trial without the metric '{}'",
              s.path, s.metric));
      return;
    }
  for (const auto& r : s.ranges)
    if (r.key == "data.validation") return;
  if (!s.base.empty()) {
    const Config base = Config::from_file(s.base);
    if (base.has("data.validation")) {
      if (holds_nothing_out(base.values().at("data.validation").value))
        throw ConfigError(fmt::format(
            "{}: data.validation = 0 leaves the trials of {} without the metric '{}': set "
            "data.validation under [set] in the sweep file, or rank by another metric",
            base.where("data.validation"), s.path, s.metric));
      return;
    }
  }
  s.fixed.emplace_back("data.validation", kSweepValidation);
  s.validation_added = true;
}

}  // namespace

std::string Trial::key() const {
  std::string s;
  for (const auto& [k, v] : overrides) {
    if (!s.empty()) s += ' ';
    s += k + "=" + config_scalar_text(v);
  }
  return s;
}

bool default_maximize(const std::string& metric) {
  auto ends = [&](const std::string& tail) {
    return metric.size() >= tail.size() &&
           metric.compare(metric.size() - tail.size(), tail.size(), tail) == 0;
  };
  // compute_s, exposed_comm_s, seconds are times; samples_per_s is a rate.
  const bool is_time = (ends("_s") && !ends("per_s")) || ends("seconds");
  return !(metric.find("loss") != std::string::npos || is_time);
}

namespace {

// Reads and checks the sweep file `cfg`, read from `path`.
SweepSpec read_sweep(const Config& cfg, const std::string& path) {
  cfg.check_known(sweep_own_keys());
  SweepSpec s;
  s.path = path;
  const fs::path here = fs::path(path).parent_path();
  s.base = cfg.get_string("base", "");
  if (!s.base.empty() && fs::path(s.base).is_relative()) s.base = (here / s.base).string();
  if (!s.base.empty() && !fs::exists(s.base))
    throw ConfigError(fmt::format("{}: key 'base': {} does not exist", cfg.where("base"), s.base));
  s.dir = cfg.get_string("dir", (fs::path("sweeps") / fs::path(path).stem()).string());
  s.mode = cfg.get_choice("mode", "grid", {"grid", "random"});
  s.metric = cfg.get_string("metric", "val_acc");
  if (s.metric.rfind("test_", 0) == 0)
    throw ConfigError(fmt::format(
        "{}: key 'metric': \"{}\" would choose the trial by the test set, and its test figure "
        "would then no longer estimate accuracy on unseen data; rank by \"val_acc\" or "
        "\"val_loss\" (the validation split, data.validation) -- the table shows test_acc "
        "beside it",
        cfg.where("metric"), s.metric));
  s.maximize =
      cfg.get_choice("goal", default_maximize(s.metric) ? "max" : "min", {"max", "min"}) == "max";
  s.trials = cfg.get_int("trials", 0, 0, 1 << 20);
  s.seed = uint64_t(cfg.get_int("seed", 0, 0, INT64_MAX));
  s.slots = cfg.get_int("slots", 0, 0, 4096);
  s.cores_per_slot = cfg.get_int("cores_per_slot", 1, 1, 4096);
  s.gpus = cfg.get_int_list("gpus", {});
  s.timeout_s = cfg.get_double("timeout_s", 0, 0, 1e9);

  for (const char* section : {"set", "grid", "uniform", "log_uniform"})
    check_train_keys(cfg, section);
  for (const auto& [key, v] : cfg.values()) {
    if (key.rfind("set.", 0) == 0) {
      std::string text = config_scalar_text(v.value);
      if (v.is_array) {  // a list-valued key, e.g. mlp.hidden = [256, 128]
        text = "[";
        for (size_t i = 0; i < v.array.size(); ++i)
          text += (i ? ", " : "") + config_scalar_text(v.array[i]);
        text += "]";
      }
      s.fixed.emplace_back(key.substr(4), text);
    } else if (key.rfind("grid.", 0) == 0) {
      std::vector<ConfigScalar> values = v.is_array ? v.array : std::vector{v.value};
      if (values.empty())
        throw ConfigError(
            fmt::format("{}: key '{}': an empty list leaves the grid with no "
                        "trials",
                        v.where, key));
      s.grid.emplace_back(key.substr(5), std::move(values));
    }
  }
  auto uni = read_ranges(cfg, "uniform", false), logu = read_ranges(cfg, "log_uniform", true);
  s.ranges.insert(s.ranges.end(), uni.begin(), uni.end());
  s.ranges.insert(s.ranges.end(), logu.begin(), logu.end());

  if (s.mode == "grid") {
    if (!s.ranges.empty())
      throw ConfigError(
          fmt::format("{}: [uniform]/[log_uniform] ranges need mode = \"random\"", path));
    if (s.grid.empty())
      throw ConfigError(
          fmt::format("{}: the grid is empty: add a [grid] section with at least "
                      "one key = [values]",
                      path));
  } else {
    if (s.grid.empty() && s.ranges.empty())
      throw ConfigError(
          fmt::format("{}: random mode needs keys under [grid] (choices), "
                      "[uniform] or [log_uniform]",
                      path));
    if (s.trials == 0)
      throw ConfigError(fmt::format("{}: random mode needs trials = N (N >= 1)", path));
  }
  if (ranks_by_validation(s.metric)) ensure_validation(s);
  return s;
}

}  // namespace

SweepSpec load_sweep(const std::string& path) {
  return read_sweep(Config::from_file(path), path);
}

SweepSpec parse_sweep(const std::string& text, const std::string& path) {
  return read_sweep(Config::from_string(text, path), path);
}

bool ranks_by_validation(const std::string& metric) {
  return metric.rfind("val_", 0) == 0 || metric.rfind("best_val_", 0) == 0;
}

std::vector<Trial> expand_trials(const SweepSpec& spec) {
  std::vector<Trial> out;
  if (spec.mode == "grid") {
    int64_t total = 1;
    for (const auto& [k, values] : spec.grid) total *= int64_t(values.size());
    for (int64_t i = 0; i < total; ++i) {
      Trial t;
      t.index = i;
      int64_t rest = i;
      std::vector<std::pair<std::string, ConfigScalar>> rev;
      for (auto it = spec.grid.rbegin(); it != spec.grid.rend(); ++it) {
        const int64_t n = int64_t(it->second.size());
        rev.emplace_back(it->first, it->second[size_t(rest % n)]);
        rest /= n;
      }
      t.overrides.assign(rev.rbegin(), rev.rend());
      out.push_back(std::move(t));
    }
  } else {
    Rng rng(derive_key(spec.seed, 0, RngPurpose::kSynthetic, 0x5eeb));
    for (int64_t i = 0; i < spec.trials; ++i) {
      Trial t;
      t.index = i;
      for (const auto& [k, values] : spec.grid)
        t.overrides.emplace_back(k, values[rng.below(values.size())]);
      for (const auto& r : spec.ranges) t.overrides.emplace_back(r.key, draw(r, rng));
      out.push_back(std::move(t));
    }
  }
  const int width = out.size() > 999 ? int(std::to_string(out.size() - 1).size()) : 3;
  for (auto& t : out) t.name = fmt::format("t{:0{}}", t.index, width);
  return out;
}

}  // namespace loom::experiments
