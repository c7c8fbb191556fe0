#include "loom/sync/model_parallel/parallel_linear.h"

#include <cmath>
#include <cstring>

#include "loom/core/error.h"

namespace loom::sync {
namespace {

// The draws of nn::Linear::init_params for the whole [out, in] weight and [out] bias, in its
// order (PyTorch's default U(-1/sqrt(in), 1/sqrt(in))); keep(i) picks the ones this slice holds.
template <typename Keep>
std::vector<float> sliced_init(Rng& rng, int64_t in, int64_t out, int64_t want, Keep keep) {
  const float bound = 1.0f / std::sqrt(float(in));
  std::vector<float> host;
  host.reserve(size_t(want));
  const int64_t total = in * out + out;
  for (int64_t i = 0; i < total; ++i) {
    const float v = (2.0f * rng.uniform() - 1.0f) * bound;
    if (keep(i)) host.push_back(v);
  }
  LOOM_CHECK_EQ(int64_t(host.size()), want);
  return host;
}

comm::BlockRange slice_of(int64_t width, const ActivationExchange& ex, const std::string& name,
                          const char* what) {
  // Checked on every rank (not only on those left empty), so all ranks refuse together
  // instead of some waiting in the first exchange for ranks that gave up.
  if (width < ex.size())
    throw ConfigError(
        fmt::format("{}: {} {} features split over {} workers leave rank {} none; "
                    "use at most {} workers or keep the layer replicated",
                    name, width, what, ex.size(), width, width));
  return comm::block_range(size_t(width), ex.size(), ex.rank());
}

}  // namespace

// ---- column-parallel ----

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, ActivationExchange& ex,
                                           bool gather_output, bool reduce_input_grad,
                                           std::string name)
    : in_(in),
      out_(out),
      ex_(ex),
      gather_output_(gather_output),
      reduce_input_grad_(reduce_input_grad),
      name_(std::move(name)) {
  const comm::BlockRange r = slice_of(out, ex, name_, "output");
  first_ = int64_t(r.begin);
  local_ = int64_t(r.size());
}

std::string ColumnParallelLinear::describe() const {
  return fmt::format("ColumnParallel({} -> {} of {}, cols {}..{}{})", in_, local_, out_, first_,
                     first_ + local_, gather_output_ ? ", gathered" : "");
}

nn::Shape ColumnParallelLinear::build(const nn::Shape& input) {
  if (nn::numel(input) != in_)
    throw ConfigError(fmt::format("{}: input has {} features per sample, expected {}", name_,
                                  nn::numel(input), in_));
  return {gather_output_ ? out_ : local_};
}

void ColumnParallelLinear::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = params + in_ * local_;
  db_ = grads + in_ * local_;
}

void ColumnParallelLinear::init_params(Rng& rng, Backend& backend) {
  const int64_t w0 = first_ * in_, w1 = (first_ + local_) * in_;
  const int64_t b0 = in_ * out_ + first_, b1 = b0 + local_;
  const auto host = sliced_init(rng, in_, out_, num_params(), [&](int64_t i) {
    return (i >= w0 && i < w1) || (i >= b0 && i < b1);
  });
  backend.copy_to_device(w_, host.data(), host.size() * sizeof(float));
}

void ColumnParallelLinear::forward(const nn::Context& ctx, const float* x, float* y,
                                   int64_t batch) {
  Backend& be = *ctx.backend;
  float* out = y;
  if (gather_output_) {
    local_y_.resize(size_t(batch * local_));
    out = local_y_.data();
  }
  be.gemm(false, true, batch, local_, in_, 1.0f, x, in_, w_, in_, 0.0f, out, local_);
  be.add_bias(out, b_, batch, local_);
  if (gather_output_) ex_.gather_columns(out, batch, out_, y);
}

void ColumnParallelLinear::backward(const nn::Context& ctx, const float* x, const float* y,
                                    const float* dy, float* dx, int64_t batch) {
  (void)y;
  Backend& be = *ctx.backend;
  const float* d = dy;
  if (gather_output_) {  // dy is the full [batch, out]: take my columns
    local_dy_.resize(size_t(batch * local_));
    for (int64_t r = 0; r < batch; ++r)
      std::memcpy(local_dy_.data() + r * local_, dy + r * out_ + first_, size_t(local_) * 4);
    d = local_dy_.data();
  }
  be.gemm(true, false, local_, in_, batch, 1.0f, d, local_, x, in_, 0.0f, dw_, in_);
  be.sum_rows(d, db_, batch, local_);
  if (!dx) return;
  be.gemm(false, false, batch, in_, local_, 1.0f, d, local_, w_, in_, 0.0f, dx, in_);
  if (reduce_input_grad_) ex_.allreduce(dx, batch * in_);
}

// ---- row-parallel ----

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, ActivationExchange& ex,
                                     std::string name)
    : in_(in), out_(out), ex_(ex), name_(std::move(name)) {
  const comm::BlockRange r = slice_of(in, ex, name_, "input");
  first_ = int64_t(r.begin);
  local_ = int64_t(r.size());
}

std::string RowParallelLinear::describe() const {
  return fmt::format("RowParallel({} of {} -> {}, rows {}..{})", local_, in_, out_, first_,
                     first_ + local_);
}

nn::Shape RowParallelLinear::build(const nn::Shape& input) {
  if (nn::numel(input) != local_)
    throw ConfigError(
        fmt::format("{}: row-parallel input shard has {} features, expected {} "
                    "(the column-parallel layer before it must split {} the same "
                    "way)",
                    name_, nn::numel(input), local_, in_));
  return {out_};
}

void RowParallelLinear::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = params + out_ * local_;
  db_ = grads + out_ * local_;
}

void RowParallelLinear::init_params(Rng& rng, Backend& backend) {
  const int64_t wn = in_ * out_;
  const auto host = sliced_init(rng, in_, out_, num_params(), [&](int64_t i) {
    if (i >= wn) return true;  // the bias, replicated
    const int64_t c = i % in_;
    return c >= first_ && c < first_ + local_;
  });
  backend.copy_to_device(w_, host.data(), host.size() * sizeof(float));
}

void RowParallelLinear::forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  be.gemm(false, true, batch, out_, local_, 1.0f, x, local_, w_, local_, 0.0f, y, out_);
  ex_.allreduce(y, batch * out_);
  be.add_bias(y, b_, batch, out_);  // after the sum: added once
}

void RowParallelLinear::backward(const nn::Context& ctx, const float* x, const float* y,
                                 const float* dy, float* dx, int64_t batch) {
  (void)y;
  Backend& be = *ctx.backend;
  be.gemm(true, false, out_, local_, batch, 1.0f, dy, out_, x, local_, 0.0f, dw_, local_);
  be.sum_rows(dy, db_, batch, out_);
  if (dx) be.gemm(false, false, batch, local_, out_, 1.0f, dy, out_, w_, local_, 0.0f, dx, local_);
}

// ---- dropout on a gathered, possibly column-sharded batch ----

ParallelDropout::ParallelDropout(float p, int layer_index, int64_t features, int64_t first,
                                 int64_t cols, const ActivationExchange& ex)
    : p_(p), layer_index_(layer_index), features_(features), first_(first), cols_(cols), ex_(ex) {
  if (!(p >= 0.0f && p < 1.0f))
    throw ConfigError(fmt::format("Dropout: probability {} must be in [0, 1)", p));
}

std::string ParallelDropout::describe() const {
  return fmt::format("ParallelDropout(p={}, cols {}..{} of {})", p_, first_, first_ + cols_,
                     features_);
}

nn::Shape ParallelDropout::build(const nn::Shape& input) {
  if (cols_ < 0) features_ = cols_ = nn::numel(input), first_ = 0;  // whole rows
  LOOM_CHECK_EQ(nn::numel(input), cols_);
  return input;
}

void ParallelDropout::forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t n = batch * cols_;
  if (!ctx.training || p_ == 0.0f) {
    ctx.backend->copy(y, x, size_t(n) * sizeof(float));
    return;
  }
  mask_.resize(size_t(n));
  const uint64_t key = mix64(ctx.dropout_key ^ uint64_t(layer_index_));
  const RowLayout& L = ex_.layout();
  LOOM_CHECK_EQ(L.total, batch);
  for (size_t q = 0; q < L.counts.size(); ++q) {
    const int64_t r0 = L.starts[q], rows = L.counts[q];
    if (cols_ == features_) {  // whole rows: one call per rank block
      ctx.backend->dropout_forward(x + r0 * cols_, y + r0 * cols_, mask_.data() + r0 * cols_,
                                   rows * cols_, p_, key, uint64_t(L.offsets[q] * features_));
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (r0 + r) * cols_;
      ctx.backend->dropout_forward(x + at, y + at, mask_.data() + at, cols_, p_, key,
                                   uint64_t((L.offsets[q] + r) * features_ + first_));
    }
  }
}

void ParallelDropout::backward(const nn::Context& ctx, const float* x, const float* y,
                               const float* dy, float* dx, int64_t batch) {
  (void)x;
  (void)y;
  if (!dx) return;
  const int64_t n = batch * cols_;
  if (!ctx.training || p_ == 0.0f) {
    ctx.backend->copy(dx, dy, size_t(n) * sizeof(float));
    return;
  }
  ctx.backend->dropout_backward(dy, mask_.data(), dx, n, p_);
}

}  // namespace loom::sync
