#include "loom/nn/layers/pad.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "loom/core/error.h"

namespace loom::nn {

std::string Pad::describe() const {
  return fmt::format("Pad(before={}, after={})", before_, after_);
}

Shape Pad::build(const Shape& input) {
  if (before_.size() != input.size() || after_.size() != input.size())
    throw ConfigError(fmt::format("Pad: before {} and after {} need one entry per axis of {}",
                                  before_, after_, shape_text(input)));
  in_ = out_ = input;
  int last = -1;  // the innermost padded axis
  for (size_t i = 0; i < input.size(); ++i) {
    if (before_[i] < 0 || after_[i] < 0 || before_[i] > (1 << 20) || after_[i] > (1 << 20))
      throw ConfigError(
          fmt::format("Pad: before {} and after {} must be from 0 to 2^20", before_, after_));
    out_[i] += before_[i] + after_[i];
    if (before_[i] + after_[i] > 0) last = int(i);
  }
  // The input's values are runs of rows: the axes after `last` are whole (one run), `last` is
  // a row's length, the axis before it the rows of one block, and every index of the axes
  // before that a block.
  const int a = last < 0 ? int(input.size()) - 1 : last;
  int64_t inner = 1;
  for (size_t i = size_t(a) + 1; i < input.size(); ++i) inner *= input[i];
  last_ = a;
  run_ = in_[size_t(a)] * inner;
  in_row_ = run_;
  out_row_ = out_[size_t(a)] * inner;
  rows_ = a > 0 ? in_[size_t(a - 1)] : 1;
  blocks_ = 1;
  for (int i = 0; i + 1 < a; ++i) blocks_ *= in_[size_t(i)];
  // The first value's place in a sample's output: before[a] into its row, before[a - 1] rows
  // down.
  lead_ = before_[size_t(a)] * inner + (a > 0 ? before_[size_t(a - 1)] * out_row_ : 0);
  return out_;
}

template <typename Copy>
void Pad::for_each_block(int64_t batch, Copy&& copy) const {
  const int64_t in_sample = numel(in_), out_sample = numel(out_);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t b = 0; b < blocks_; ++b) {
      // b as an index over the axes before the rows' axis: the block's offsets.
      int64_t rest = b, in_off = 0, out_off = 0;
      int64_t in_stride = rows_ * in_row_;
      int64_t out_stride = (last_ > 0 ? out_[size_t(last_ - 1)] : 1) * out_row_;
      for (int64_t i = last_ - 2; i >= 0; --i) {
        const int64_t at = rest % in_[size_t(i)];
        rest /= in_[size_t(i)];
        in_off += at * in_stride;
        out_off += (at + before_[size_t(i)]) * out_stride;
        in_stride *= in_[size_t(i)];
        out_stride *= out_[size_t(i)];
      }
      copy(n * in_sample + in_off, n * out_sample + out_off + lead_);
    }
}

void Pad::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  be.fill(y, batch * numel(out_), 0.0f);
  for_each_block(batch, [&](int64_t in_off, int64_t out_off) {
    be.copy_rows(y + out_off, out_row_, x + in_off, in_row_, rows_, run_);
  });
}

void Pad::backward(const Context& ctx, const float*, const float*, const float* dy, float* dx,
                   int64_t batch) {
  if (!dx) return;
  Backend& be = *ctx.backend;
  for_each_block(batch, [&](int64_t in_off, int64_t out_off) {
    be.copy_rows(dx + in_off, in_row_, dy + out_off, out_row_, rows_, run_);
  });
}

}  // namespace loom::nn
