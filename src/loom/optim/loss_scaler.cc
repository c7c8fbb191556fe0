#include "loom/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"

namespace loom::optim {

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options), scale_(options.initial) {
  const auto good = [](float v) { return std::isfinite(v) && v > 0.0f; };
  if (!good(options.initial) || !good(options.min_scale) || !good(options.max_scale))
    throw ConfigError(
        fmt::format("loss scaler: scales must be positive and finite (initial {}, min {}, max {})",
                    options.initial, options.min_scale, options.max_scale));
  if (options.min_scale > options.max_scale || options.initial < options.min_scale ||
      options.initial > options.max_scale)
    throw ConfigError(fmt::format("loss scaler: need min {} <= initial {} <= max {}",
                                  options.min_scale, options.initial, options.max_scale));
  if (options.growth_interval < 1)
    throw ConfigError(fmt::format("loss scaler: growth interval {} must be at least 1 step",
                                  options.growth_interval));
}

bool LossScaler::update(bool found_non_finite) {
  if (found_non_finite) {
    ++skipped_;
    streak_ = 0;
    scale_ = std::max(options_.min_scale, scale_ * 0.5f);
    return false;
  }
  if (++streak_ >= options_.growth_interval) {
    streak_ = 0;
    scale_ = std::min(options_.max_scale, scale_ * 2.0f);
  }
  return true;
}

bool LossScaler::unscale(Backend& backend, float* grads, int64_t n) {
  const bool bad = backend.has_non_finite(grads, n);
  if (!bad) backend.scale(n, 1.0f / scale_, grads);
  return update(bad);
}

bool LossScaler::restore(float scale, int64_t streak, int64_t skipped) {
  if (!(scale >= options_.min_scale && scale <= options_.max_scale) || streak < 0 ||
      streak >= options_.growth_interval || skipped < 0)
    return false;
  scale_ = scale;
  streak_ = streak;
  skipped_ = skipped;
  return true;
}

std::vector<ConfigKeySpec> loss_scaler_config_keys() {
  return {
      {"loss_scale.mode", ConfigType::kString, "\"auto\"",
       "dynamic loss scaling: \"auto\" (dynamic with precision = \"fp16\"), \"dynamic\" "
       "(in any precision), \"none\""},
      {"loss_scale.initial", ConfigType::kDouble, "65536",
       "the first loss scale (a power of two keeps unscaled gradients exact)"},
      {"loss_scale.growth_interval", ConfigType::kInt, "2000",
       "clean steps in a row before the scale doubles (an overflowed step is skipped and "
       "halves it)"},
      {"loss_scale.min", ConfigType::kDouble, "1", "the scale never halves below this"},
      {"loss_scale.max", ConfigType::kDouble, "16777216", "the scale never doubles above this"},
  };
}

std::string LossScaler::describe() const {
  return fmt::format("dynamic loss scale {} (x2 after {} clean steps, /2 on overflow, in [{}, {}])",
                     scale_, options_.growth_interval, options_.min_scale, options_.max_scale);
}

}  // namespace loom::optim
