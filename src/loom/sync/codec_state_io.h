// Checkpoint sections for a compressed allreduce's per-bucket codec state (worker- and
// owner-side residuals, PowerSGD's warm-started Q, encode counts), so a resumed run continues
// the error feedback bit for bit. Sections: "<prefix>.worker<j>.{residual,aux,steps}" and
// "<prefix>.owner.{residual,aux,steps}".
#pragma once

#include <span>
#include <string>
#include <vector>

#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

void save_codec_states(const sync::CompressedAllreduceState& st, const std::string& prefix,
                       StrategyState& out);
// InputError naming the section if it is missing or sized for another config.
void restore_codec_states(sync::CompressedAllreduceState& st, const std::string& prefix,
                          const StrategyState& in);

// A resume on another world size (docs/checkpoint.md): error feedback promises that what the
// codec held back is sent later, so the rule keeps the sum. add_saved_residuals adds up every
// rank's residuals of one bucket of n elements (the worker side of each stripe and the owner
// side of the rank's own stripe, at their offsets in the bucket) from the sections that
// save_codec_states wrote on each rank of the checkpoint's world; `total` (n, or empty) holds
// the sum so far and is returned with them added. Absent sections add nothing (a world of one
// runs no codec).
std::vector<double> add_saved_residuals(const std::vector<StrategyState>& ranks,
                                        const std::string& prefix, size_t n,
                                        std::vector<double> total);
// Puts the sum into st: on rank 0 all of it, in its worker-side residuals (stripe by stripe),
// zero everywhere else (the owner side, other ranks), so the resumed world's residuals add up
// to the same sum. PowerSGD's Q and the encode counts are old rank 0's, where it saved them.
void restore_summed_residuals(sync::CompressedAllreduceState& st, const std::string& prefix,
                              std::span<const double> total, const StrategyState& old_rank0);

}  // namespace loom::sync
