// The histogram of a tensor's values for TensorBoard's histogram and distribution dashboards.
#pragma once

#include <span>

#include "loom/train/tensorboard_event.h"

namespace loom::train::tensorboard {

// `buckets` equal-width buckets from the least to the greatest finite value (one bucket when
// they are equal); NaN and Inf are left out of every figure, num included. TensorBoard
// re-bins what it draws, so equal widths lose nothing its plots show.
Histogram histogram_of(std::span<const float> values, int buckets = 30);

}  // namespace loom::train::tensorboard
