// The optimizer's keys of a run's config (optim.*, lr.*, loss_scale.*) read into the options of
// optim/: each key read here once, with its range, and refused by name where the run's choice
// gives it no meaning (an Adam option under SGD, a schedule's parameter under another schedule).
#pragma once

#include <optional>

#include "loom/core/config.h"
#include "loom/optim/loss_scaler.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"

namespace loom::plan {

// optim.name and the chosen optimizer's keys.
optim::OptimizerOptions read_optimizer_options(const Config& cfg);

// optim.lr and lr.*.
optim::LrScheduleOptions read_lr_schedule_options(const Config& cfg);

// The run's loss scaler options, or nullopt when it does not scale its loss (loss_scale.mode
// "auto" scales with precision = "fp16" only).
std::optional<optim::LossScalerOptions> read_loss_scaler_options(const Config& cfg);

// optim.clip_norm; 0 when the key is absent (no clipping); ConfigError naming it when <= 0.
float read_clip_norm(const Config& cfg);

}  // namespace loom::plan
