#include "loom/nn/layers/embedding.h"

#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

namespace {
constexpr int64_t kMaxTable = int64_t(1) << 28;  // floats in one table (1 GiB)

void init_normal(Rng& rng, Backend& backend, float* dst, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  for (float& v : host) v = rng.normal();
  backend.copy_to_device(dst, host.data(), host.size() * sizeof(float));
}
}  // namespace

Embedding::Embedding(int64_t vocab, int64_t dim) : vocab_(vocab), dim_(dim) {
  if (vocab_ <= 0 || dim_ <= 0 || vocab_ > kMaxTable / dim_)
    throw ConfigError(
        fmt::format("Embedding(vocab {}, dim {}): sizes must be positive and the "
                    "table at most 2^28 floats",
                    vocab_, dim_));
}

std::string Embedding::describe() const {
  return fmt::format("Embedding(vocab {}, dim {})", vocab_, dim_);
}

Shape Embedding::build(const Shape& input) {
  if (input.size() != 1)
    throw ConfigError(
        fmt::format("{}: input {} is not [time] (token ids)", describe(), shape_text(input)));
  time_ = input[0];
  return {time_, dim_};
}

void Embedding::bind(float* params, float* grads) {
  table_ = params;
  dtable_ = grads;
}

void Embedding::init_params(Rng& rng, Backend& backend) {
  init_normal(rng, backend, table_, num_params());
}

void Embedding::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  const int64_t n = batch * time_;
  const int64_t bad = ctx.backend->embedding_forward(x, table_, n, vocab_, dim_, y);
  if (bad < 0) return;
  float value = 0;
  ctx.backend->copy_to_host(&value, x + bad, sizeof(float));
  throw InputError(
      fmt::format("{}: token id {} (sample {}, position {}) is not an integer in "
                  "[0, {})",
                  describe(), value, bad / time_, bad % time_, vocab_));
}

void Embedding::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  const int64_t n = batch * time_;
  ctx.backend->embedding_backward(x, dy, n, vocab_, dim_, dtable_);
  if (dx) ctx.backend->fill(dx, n, 0.0f);
}

PositionEmbedding::PositionEmbedding(int64_t max_len, int64_t dim) : max_len_(max_len), dim_(dim) {
  if (max_len_ <= 0 || dim_ <= 0 || max_len_ > kMaxTable / dim_)
    throw ConfigError(
        fmt::format("PositionEmbedding(max_len {}, dim {}): sizes must be positive "
                    "and the table at most 2^28 floats",
                    max_len_, dim_));
}

std::string PositionEmbedding::describe() const {
  return fmt::format("PositionEmbedding(max_len {}, dim {})", max_len_, dim_);
}

Shape PositionEmbedding::build(const Shape& input) {
  if (input.size() != 2 || input[1] != dim_)
    throw ConfigError(
        fmt::format("{}: input {} is not [time, {}]", describe(), shape_text(input), dim_));
  if (input[0] > max_len_)
    throw ConfigError(fmt::format("{}: input {} has {} positions, more than max_len {}", describe(),
                                  shape_text(input), input[0], max_len_));
  time_ = input[0];
  return input;
}

void PositionEmbedding::bind(float* params, float* grads) {
  table_ = params;
  dtable_ = grads;
}

void PositionEmbedding::init_params(Rng& rng, Backend& backend) {
  init_normal(rng, backend, table_, num_params());
}

void PositionEmbedding::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t per_sample = time_ * dim_;
  if (y != x) be.copy(y, x, size_t(batch * per_sample) * sizeof(float));
  // One sample is one row of time * dim values; the table's first `time` rows are its bias.
  be.add_bias(y, table_, batch, per_sample);
}

void PositionEmbedding::backward(const Context& ctx, const float* x, const float* y,
                                 const float* dy, float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t per_sample = time_ * dim_;
  be.sum_rows(dy, dtable_, batch, per_sample);
  if (max_len_ > time_) be.fill(dtable_ + per_sample, (max_len_ - time_) * dim_, 0.0f);
  if (dx) be.copy(dx, dy, size_t(batch * per_sample) * sizeof(float));
}

ClassToken::ClassToken(int64_t count, int64_t dim) : count_(count), dim_(dim) {
  if (count_ <= 0 || dim_ <= 0 || count_ > kMaxTable / dim_)
    throw ConfigError(
        fmt::format("ClassToken(count {}, dim {}): sizes must be positive and the "
                    "rows at most 2^28 floats",
                    count_, dim_));
}

std::string ClassToken::describe() const {
  return fmt::format("ClassToken(count {}, dim {})", count_, dim_);
}

Shape ClassToken::build(const Shape& input) {
  if (input.size() != 2 || input[1] != dim_)
    throw ConfigError(
        fmt::format("{}: input {} is not [time, {}]", describe(), shape_text(input), dim_));
  time_ = input[0];
  return {count_ + time_, dim_};
}

void ClassToken::bind(float* params, float* grads) {
  table_ = params;
  dtable_ = grads;
}

void ClassToken::init_params(Rng& rng, Backend& backend) {
  backend.fill(table_, num_params(), 0.0f);
}

void ClassToken::ensure_tiles(Backend& backend, int64_t batch) {
  if (int64_t(tiles_.size()) < batch * count_ * dim_)
    tiles_ = DeviceBuffer<float>(backend, batch * count_ * dim_);
}

void ClassToken::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t head = count_ * dim_, body = time_ * dim_, row = head + body;
  be.copy_rows(y + head, row, x, body, batch, body);
  ensure_tiles(be, batch);
  be.fill(tiles_.data(), batch * head, 0.0f);
  be.add_bias(tiles_.data(), table_, batch, head);
  be.copy_rows(y, row, tiles_.data(), head, batch, head);
}

void ClassToken::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                          float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t head = count_ * dim_, body = time_ * dim_, row = head + body;
  if (dx) be.copy_rows(dx, body, dy + head, row, batch, body);
  ensure_tiles(be, batch);
  be.copy_rows(tiles_.data(), head, dy, row, batch, head);
  be.sum_rows(tiles_.data(), dtable_, batch, head);
}

}  // namespace loom::nn
