#include "loom/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"

namespace loom::optim {

LrSchedule::LrSchedule(Kind kind, double base_lr, int64_t steps_per_epoch, int64_t total_steps,
                       double warmup_epochs, double step_epochs, double gamma, double min_lr)
    : kind_(kind),
      base_(base_lr),
      gamma_(gamma),
      min_(min_lr),
      steps_per_epoch_(std::max<int64_t>(1, steps_per_epoch)),
      total_(std::max<int64_t>(1, total_steps)),
      warmup_steps_(int64_t(std::llround(warmup_epochs * double(steps_per_epoch_)))),
      step_steps_(
          std::max<int64_t>(1, int64_t(std::llround(step_epochs * double(steps_per_epoch_))))) {}

double LrSchedule::at(int64_t step) const {
  double lr = base_;
  switch (kind_) {
    case Kind::kConstant:
      break;
    case Kind::kStep:
      lr = base_ * std::pow(gamma_, double(step / step_steps_));
      break;
    case Kind::kCosine: {
      const double t = std::min<double>(double(step), double(total_));
      lr = min_ + (base_ - min_) * 0.5 * (1.0 + std::cos(M_PI * t / double(total_)));
      break;
    }
  }
  if (step < warmup_steps_) lr *= double(step + 1) / double(warmup_steps_);
  return lr;
}

std::string LrSchedule::describe() const {
  const char* names[] = {"constant", "step", "cosine"};
  return fmt::format("{} lr {}{}", names[int(kind_)], base_,
                     warmup_steps_ ? fmt::format(", warm-up {} steps", warmup_steps_) : "");
}

std::vector<ConfigKeySpec> lr_schedule_config_keys() {
  return {
      {"lr.schedule", ConfigType::kString, "\"constant\"", "\"constant\", \"step\" or \"cosine\""},
      {"lr.warmup_epochs", ConfigType::kDouble, "0", "linear warm-up length in epochs"},
      {"lr.step_epochs", ConfigType::kDouble, "10", "\"step\": epochs between decays"},
      {"lr.gamma", ConfigType::kDouble, "0.1", "\"step\": decay factor"},
      {"lr.min", ConfigType::kDouble, "0", "\"cosine\": final learning rate"},
  };
}

LrSchedule make_lr_schedule(const LrScheduleOptions& o, int64_t steps_per_epoch,
                            int64_t total_steps) {
  return LrSchedule(o.kind, o.lr, steps_per_epoch, total_steps, o.warmup_epochs, o.step_epochs,
                    o.gamma, o.min_lr);
}

}  // namespace loom::optim
