#include "loom/data/sources/token_windows.h"

#include "loom/core/error.h"
#include "loom/core/rng.h"

namespace loom::data {

int64_t window_count(int64_t tokens, int64_t context, bool random_offset) {
  if (context < 1 || tokens < 1) return 0;
  // A window reads context + 1 tokens (its labels reach one past it). At offset o the windows
  // k = 0, 1, ... fit while o + k * context + context + 1 <= tokens; with o up to context - 1
  // the count that fits at every offset is floor(tokens / context) - 1.
  const int64_t n = random_offset ? tokens / context - 1 : (tokens - 1) / context;
  return std::max<int64_t>(n, 0);
}

TokenWindowSource::TokenWindowSource(std::shared_ptr<const TokenShard> tokens, WindowOptions opts)
    : tokens_(std::move(tokens)), opts_(opts) {
  end_ = opts_.end < 0 ? tokens_->size() : opts_.end;
  LOOM_CHECK(opts_.begin >= 0 && opts_.begin <= end_ && end_ <= tokens_->size(),
             "token range [{}, {}) of {}", opts_.begin, end_, tokens_->size());
  if (opts_.context < 1)
    throw ConfigError(fmt::format("data.context must be >= 1, got {}", opts_.context));
  count_ = window_count(end_ - opts_.begin, opts_.context, opts_.random_offset);
  if (count_ < 1)
    throw InputError(fmt::format(
        "{}: tokens [{}, {}) ({} tokens) hold no window of data.context = {} ({} tokens needed{})",
        tokens_->path(), opts_.begin, end_, end_ - opts_.begin, opts_.context,
        opts_.random_offset ? 2 * opts_.context : opts_.context + 1,
        opts_.random_offset ? " at every per-epoch offset" : ""));
}

int64_t TokenWindowSource::epoch_offset(int64_t epoch) const {
  if (!opts_.random_offset || opts_.context == 1) return 0;
  // A stream of its own (the shuffle's purpose, its second counter): the order of windows
  // and their offset are both functions of (seed, epoch), so a resumed epoch is the same.
  Rng rng(opts_.seed, 1, RngPurpose::kShuffle, uint64_t(epoch));
  return int64_t(rng.below(uint64_t(opts_.context)));
}

int64_t TokenWindowSource::window_start(int64_t epoch, int64_t i) const {
  return opts_.begin + epoch_offset(epoch) + i * opts_.context;
}

void TokenWindowSource::gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                                        int32_t* y) const {
  const int64_t c = opts_.context, offset = opts_.begin + epoch_offset(epoch);
  for (int64_t k = 0; k < n; ++k) {
    if (idx[k] < 0 || idx[k] >= count_)
      throw Error(
          fmt::format("{}: window {} requested, there are {}", tokens_->path(), idx[k], count_));
    const int64_t s = offset + idx[k] * c;
    for (int64_t j = 0; j < c; ++j) {
      x[k * c + j] = float(tokens_->token(s + j));
      y[k * c + j] = tokens_->token(s + j + 1);
    }
  }
}

}  // namespace loom::data
