// Checkpoint sections for a compressed allreduce's per-bucket codec state (worker- and
// owner-side residuals, PowerSGD's warm-started Q, encode counts), so a resumed run continues
// the error feedback bit for bit. Sections: "<prefix>.worker<j>.{residual,aux,steps}" and
// "<prefix>.owner.{residual,aux,steps}".
#pragma once

#include <string>

#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

void save_codec_states(const sync::CompressedAllreduceState& st, const std::string& prefix,
                       StrategyState& out);
// InputError naming the section if it is missing or sized for another config.
void restore_codec_states(sync::CompressedAllreduceState& st, const std::string& prefix,
                          const StrategyState& in);

}  // namespace loom::sync
