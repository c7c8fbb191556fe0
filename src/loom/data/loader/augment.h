// Per-sample augmentation for images laid out {C, H, W} (or {H, W}): random crop with zero
// padding then horizontal flip, as torchvision's RandomCrop(padding) + RandomHorizontalFlip
// (the recipe of He et al., "Deep Residual Learning", 2016, sec. 4.2). Off by default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

struct AugmentOptions {
  int crop_padding = 0;    // pad by p on every side, then crop back to H x W at a random offset
  bool hflip = false;      // flip left-right with probability 1/2
  float pad_value = 0;     // value of padded pixels (in the normalised space the sample is in)
  std::string where = "";  // where the config set the option that is on, for messages ("": none)
  bool enabled() const { return crop_padding > 0 || hflip; }
};

// Augments one sample in place. The draws come from the Philox stream `key` alone (the loader
// keys it by seed, epoch and the sample's position in the epoch), so the result does not depend
// on the world size, the prefetch depth or the thread that runs it. `scratch` holds numel floats.
void augment_sample(float* x, const std::vector<int64_t>& shape, const AugmentOptions& opts,
                    uint64_t key, float* scratch);

}  // namespace loom::data
