#include "loom/plan/auto_reader.h"

#include <fmt/format.h>

#include <variant>

#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/plan/codec_reader.h"

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
  o.max_bits_delta = cfg.get_double("auto.max_bits_delta", 0.05, 0.0, 100.0);
  // Each with its own residual format: codec.residual = "bf16" belongs to the codecs that can
  // keep one, and the replay measures the codecs as their defaults keep it.
  for (const std::string& name : compress::codec_names())
    if (compress::codec_kind(name).auto_candidate) {
      compress::CodecOptions c = read_codec_options(name, cfg);
      c.residual.reset();
      o.codec_options.push_back(c);
    }
  o.calibration = cfg.get_string("auto.calibration", "");
  o.calibration_mismatch = perf::mismatch_policy_from_name(
      cfg.get_choice("auto.calibration_mismatch", "error", {"error", "measure"}));
  o.check_after = cfg.get_int("auto.check_after", 10, 0, int64_t(1) << 40);
  o.check_steps = cfg.get_int("auto.check_steps", 20, 0, int64_t(1) << 40);
  o.test_probe_link_factor = cfg.get_double("auto.test_probe_link_factor", 1.0, 1e-9, 1e12);
  o.test_window_comm_s = cfg.get_double("auto.test_window_comm_s", 0.0, 0.0, 1e6);
  return o;
}

std::vector<ConfigKeySpec> auto_config_keys() {
  return {
      {"auto.max_accuracy_delta", ConfigType::kDouble, "0.5",
       "codec/sync = \"auto\": points of test accuracy below fp32 a lossy option may cost "
       "(a measured row of data/perf/codec_accuracy.toml, or the codec's fidelity on the run's "
       "gradients, data/perf/codec_fidelity.toml)"},
      {"auto.max_bits_delta", ConfigType::kDouble, "0.05",
       "codec/sync = \"auto\" on a token run: bits per byte (or token) of validation loss above "
       "fp32 a lossy option may cost"},
      {"auto.lossy", ConfigType::kBool, "auto",
       "codec/sync = \"auto\": lossy options allowed where a measured row or their fidelity on "
       "the run's gradients puts their cost within the budget (auto), also where it is unknown "
       "(true), or never (false)"},
      {"auto.calibration", ConfigType::kString, "\"\"",
       "codec/sync = \"auto\": a `loom bench calibrate` file of this machine to decide from "
       "instead of measuring at start"},
      {"auto.machine", ConfigType::kString, "(set by loom)",
       "where the choice was made (CPU | transport | ranks): a resume on the same machine "
       "keeps its checkpoint's choice"},
      {"auto.calibration_mismatch", ConfigType::kString, "\"error\"",
       "a calibration file from another machine (CPU, transport, world size): \"error\", or "
       "\"measure\" (warn and measure instead)"},
      {"auto.check_after", ConfigType::kInt, "10",
       "codec/sync = \"auto\": steps after the start before the check window (past the "
       "1-bit codec's exact warm-up)"},
      {"auto.check_steps", ConfigType::kInt, "20",
       "codec/sync = \"auto\": steps whose measured step is compared with the prediction "
       "(rounded up to whole blocks with bmuf); off by more than the model's validated error "
       "(15%), auto re-decides once; 0 = no check"},
      {"auto.revised", ConfigType::kString, "(set by loom)",
       "what the check after the warm-up window switched from and to, at which step"},
      {"auto.test_probe_link_factor", ConfigType::kDouble, "1",
       "tests only: the start-up link is read this many times faster than measured"},
      {"auto.test_window_comm_s", ConfigType::kDouble, "0",
       "tests only: seconds of exposed communication added to each step of the check window"},
  };
}

}  // namespace loom::plan
