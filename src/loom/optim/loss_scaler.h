// Dynamic loss scaling for fp16 training (Micikevicius et al., "Mixed Precision Training",
// 2018; the schedule of PyTorch's torch.cuda.amp.GradScaler). fp16's range ends at 65504 and
// its normals at 2^-14, so small gradients of an fp16 backward underflow unless the loss is
// multiplied by a scale s first. The scale is searched for while training: a step whose
// (scaled) gradients hold Inf or NaN overflowed, so it is skipped and s halves; after
// `growth_interval` clean steps in a row s doubles, to keep as much of the small gradients as
// the range allows. The weights' update sees the gradients divided by s again.
//
// Only fp16 needs it (bf16 has fp32's exponent range), but it runs in any precision, as
// PyTorch's GradScaler does: the training loop (train/checkpoint_guard.h) scales the loss's
// gradient, unscales each gradient range before the sync strategy sees it, and skips a step
// that overflowed on any worker (docs/precision.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/config_value.h"
#include "loom/tensor/backend.h"

namespace loom::optim {

struct LossScalerOptions {
  float initial = 65536.0f;        // 2^16
  int64_t growth_interval = 2000;  // clean steps in a row before the scale doubles
  float min_scale = 1.0f;          // halving stops here
  float max_scale = 16777216.0f;   // 2^24: doubling stops here
};

class LossScaler {
 public:
  // Throws ConfigError for options out of range (scales not positive and finite, min > max,
  // initial outside [min, max], growth_interval < 1).
  explicit LossScaler(const LossScalerOptions& options = {});

  // What the loss (or its gradient at the top of backward) is multiplied by this step.
  float scale() const { return scale_; }
  // The step's verdict, which moves the scale: false (skip the update) when the gradients were
  // not all finite, after which the scale halves (not below min_scale); true otherwise, and
  // the growth_interval-th clean step in a row doubles the scale (not above max_scale).
  bool update(bool found_non_finite);
  // The whole step's check on n gradients of `backend` scaled by scale(): when all are finite
  // they are divided by the scale in place and the step may apply them (true); otherwise they
  // are left as they are and the step is skipped (false). Then update().
  bool unscale(Backend& backend, float* grads, int64_t n);

  int64_t skipped_steps() const { return skipped_; }
  int64_t clean_streak() const { return streak_; }
  const LossScalerOptions& options() const { return options_; }
  std::string describe() const;
  // Puts back what scale(), clean_streak() and skipped_steps() said (a checkpoint's); false,
  // changing nothing, when they are out of this scaler's range (scale outside [min, max], a
  // streak outside [0, growth_interval), a negative count).
  bool restore(float scale, int64_t streak, int64_t skipped);

 private:
  LossScalerOptions options_;
  float scale_;
  int64_t streak_ = 0, skipped_ = 0;
};

// Keys: loss_scale.mode ("auto": dynamic with precision = "fp16", none otherwise; "dynamic";
// "none"), loss_scale.initial, loss_scale.growth_interval, loss_scale.min, loss_scale.max.
std::vector<ConfigKeySpec> loss_scaler_config_keys();

}  // namespace loom::optim
