#include "loom/plan/auto_reader.h"

#include <fmt/format.h>

#include <variant>

#include "loom/core/error.h"

namespace loom::plan {
namespace {

perf::LossyPolicy read_lossy_policy(const Config& cfg) {
  if (!cfg.has("auto.lossy")) return perf::LossyPolicy::kMeasured;
  const ConfigValue& v = cfg.values().at("auto.lossy");
  if (!v.is_array && std::holds_alternative<std::string>(v.value) &&
      std::get<std::string>(v.value) == "auto")
    return perf::LossyPolicy::kMeasured;
  if (v.is_array || !std::holds_alternative<bool>(v.value))
    throw ConfigError(fmt::format("{}: key 'auto.lossy': expected true, false or \"auto\"",
                                  cfg.where("auto.lossy")));
  return std::get<bool>(v.value) ? perf::LossyPolicy::kAlways : perf::LossyPolicy::kNever;
}

}  // namespace

AutoOptions read_auto_options(const Config& cfg) {
  AutoOptions o;
  o.lossy = read_lossy_policy(cfg);
  o.max_accuracy_delta = cfg.get_double("auto.max_accuracy_delta", 0.5, 0.0, 100.0);
  o.calibration = cfg.get_string("auto.calibration", "");
  o.calibration_mismatch = perf::mismatch_policy_from_name(
      cfg.get_choice("auto.calibration_mismatch", "error", {"error", "measure"}));
  o.check_after = cfg.get_int("auto.check_after", 10, 0, int64_t(1) << 40);
  o.check_steps = cfg.get_int("auto.check_steps", 20, 0, int64_t(1) << 40);
  o.test_probe_link_factor = cfg.get_double("auto.test_probe_link_factor", 1.0, 1e-9, 1e12);
  o.test_window_comm_s = cfg.get_double("auto.test_window_comm_s", 0.0, 0.0, 1e6);
  return o;
}

}  // namespace loom::plan
