// Token windows: a token stream (token_shard.h) cut into samples for next-token prediction.
// Sample i of an epoch is the window starting at s_i = offset + i * context: its features are
// tokens [s_i, s_i + context) as floats (the ids), its labels tokens [s_i + 1, s_i + context + 1),
// one per position. docs/data.md ("Token windows") says which windows make an epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loom/data/formats/token_shard.h"
#include "loom/data/sources/sample_source.h"

namespace loom::data {

struct WindowOptions {
  int64_t context = 0;  // tokens per window (data.context), >= 1
  // Tokens [begin, end) of the stream are this source's (a split by position); end -1: all.
  int64_t begin = 0, end = -1;
  // true (training): non-overlapping windows at an offset in [0, context) drawn per epoch
  // from (seed, epoch), floor(tokens / context) - 1 of them in every epoch. false
  // (evaluation): the windows at offset 0, floor((tokens - 1) / context) of them.
  bool random_offset = false;
  uint64_t seed = 0;
};

class TokenWindowSource final : public SampleSource {
 public:
  // InputError naming the shard when its range holds too few tokens for one window of
  // `context` (plus the one token the last label needs).
  TokenWindowSource(std::shared_ptr<const TokenShard> tokens, WindowOptions opts);
  int64_t count() const override { return count_; }
  std::vector<int64_t> sample_shape() const override { return {opts_.context}; }
  int num_classes() const override { return int(tokens_->vocabulary().size); }
  int64_t labels_per_sample() const override { return opts_.context; }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override {
    gather_in_epoch(0, idx, n, x, y);
  }
  void gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                       int32_t* y) const override;
  int64_t stored_record_bytes() const override {
    return opts_.context * int64_t(dtype_size(tokens_->info().dtype));
  }
  // The first token of window i in `epoch`.
  int64_t window_start(int64_t epoch, int64_t i) const;
  int64_t epoch_offset(int64_t epoch) const;
  int64_t tokens() const { return end_ - opts_.begin; }
  const TokenShard& shard() const { return *tokens_; }

 private:
  std::shared_ptr<const TokenShard> tokens_;
  WindowOptions opts_;
  int64_t end_ = 0, count_ = 0;
};

// The windows' count for `tokens` tokens (the rule above); 0 when not even one fits.
int64_t window_count(int64_t tokens, int64_t context, bool random_offset);

}  // namespace loom::data
