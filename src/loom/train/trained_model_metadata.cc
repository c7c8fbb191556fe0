#include "loom/train/trained_model_metadata.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "loom/core/error.h"

namespace loom::train {

namespace {

[[noreturn]] void bad_key(const std::string& file, const std::string& key, const std::string& value,
                          const std::string& want) {
  throw InputError(fmt::format("{}: metadata \"{}\" is \"{}\", not {}", file, key, value, want));
}

// The whole string as one finite float (no leading blanks, no trailing text, no hex, no
// "nan"/"inf"), or nothing.
std::optional<float> parse_float(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  if (s.find_first_of("xXnNiI") != std::string::npos) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) ||
      std::fabs(v) > double(std::numeric_limits<float>::max()))
    return std::nullopt;
  return float(v);
}

std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty() || !(s[0] == '-' || std::isdigit(static_cast<unsigned char>(s[0]))))
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return std::nullopt;
  return int64_t(v);
}

}  // namespace

TrainedModelMetadata read_trained_model_metadata(const std::map<std::string, std::string>& meta,
                                                 const std::string& file) {
  TrainedModelMetadata r;
  if (const auto it = meta.find(kStepsKey); it != meta.end()) {
    const std::optional<int64_t> s = parse_int(it->second);
    if (!s || *s < -1) bad_key(file, kStepsKey, it->second, "a step count (-1: not recorded)");
    r.steps = *s;
  }
  const auto mean_it = meta.find(kMeanKey), stddev_it = meta.find(kStddevKey);
  const bool has_mean = mean_it != meta.end(), has_stddev = stddev_it != meta.end();
  if (has_mean != has_stddev)
    throw InputError(
        fmt::format("{}: metadata has \"{}\" without \"{}\" (the input "
                    "normalisation needs both)",
                    file, has_mean ? kMeanKey : kStddevKey, has_mean ? kStddevKey : kMeanKey));
  if (has_mean) {
    const std::optional<float> mean = parse_float(mean_it->second);
    if (!mean) bad_key(file, kMeanKey, mean_it->second, "a finite number");
    const std::optional<float> stddev = parse_float(stddev_it->second);
    // The pixels are scaled by 1 / (255 stddev) and shifted by -mean / stddev: both finite.
    if (!stddev || !(*stddev > 0.0f) || !std::isfinite(1.0 / (255.0 * double(*stddev))) ||
        !std::isfinite(float(1.0 / (255.0 * double(*stddev)))) ||
        !std::isfinite(float(double(*mean) / double(*stddev))))
      bad_key(file, kStddevKey, stddev_it->second,
              fmt::format("a finite number > 0 that input_mean ({}) can be divided by", *mean));
    r.input_normalisation = data::Normalisation{*mean, *stddev};
  }
  if (const auto it = meta.find(kLossKey); it != meta.end()) {
    if (it->second == "mse")
      r.loss = nn::LossKind::kMse;
    else if (it->second != "cross_entropy")
      bad_key(file, kLossKey, it->second, "\"cross_entropy\" or \"mse\"");
  }
  return r;
}

}  // namespace loom::train
