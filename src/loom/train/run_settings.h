// The training loop's own settings (threads, batch, epochs, precision, ...), which the run plan
// reads from the run's config (plan/train_settings.h).
#pragma once

#include "loom/plan/train_settings.h"

namespace loom::train {

using Settings = plan::TrainSettings;

}  // namespace loom::train
