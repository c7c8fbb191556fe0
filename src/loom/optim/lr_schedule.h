// Learning-rate schedules as a pure function of the step, so a resumed run gets the same rates.
//   lr.schedule = "constant" | "step" | "cosine"
//   lr.warmup_epochs = 0   linear warm-up from lr/warmup_steps to lr (Goyal et al. 2017)
//   lr.step_epochs = 10, lr.gamma = 0.1   ("step": lr * gamma^(epoch / step_epochs))
//   lr.min = 0                            ("cosine": lr.min + (lr - lr.min)(1 + cos(pi t/T))/2)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/config_value.h"

namespace loom::optim {

class LrSchedule {
 public:
  enum class Kind { kConstant, kStep, kCosine };
  LrSchedule() = default;
  LrSchedule(Kind kind, double base_lr, int64_t steps_per_epoch, int64_t total_steps,
             double warmup_epochs = 0, double step_epochs = 10, double gamma = 0.1,
             double min_lr = 0);
  // Learning rate for the 0-based global step.
  double at(int64_t step) const;
  std::string describe() const;

 private:
  Kind kind_ = Kind::kConstant;
  double base_ = 0.05, gamma_ = 0.1, min_ = 0;
  int64_t steps_per_epoch_ = 1, total_ = 1, warmup_steps_ = 0, step_steps_ = 1;
};

std::vector<ConfigKeySpec> lr_schedule_config_keys();
// A schedule's settings (optim.lr and the lr.* keys), read by the run plan
// (plan/optim_reader.h).
struct LrScheduleOptions {
  LrSchedule::Kind kind = LrSchedule::Kind::kConstant;
  double lr = 0.05, warmup_epochs = 0, step_epochs = 10, gamma = 0.1, min_lr = 0;
};
LrSchedule make_lr_schedule(const LrScheduleOptions& o, int64_t steps_per_epoch,
                            int64_t total_steps);

}  // namespace loom::optim
