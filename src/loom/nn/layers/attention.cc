#include "loom/nn/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/core/error.h"

namespace loom::nn {

namespace {
// The causal products in row blocks of about kRowBlock rows: block r0..r1 needs keys 0..r1
// only, so two blocks skip a quarter of the score and weighting products. On gpt-char (128
// positions, head size 32, an AVX2 CPU) blocks of 64 took the attention from 143 to 134 ms a
// step; blocks of 32 skip more work but were no faster (137 ms): the products get too small.
constexpr int64_t kRowBlock = 64;

// f(r0, r1) for each of the near-equal row blocks r0..r1 over `time` rows, in order.
template <typename F>
void for_row_blocks(int64_t time, F f) {
  const int64_t blocks = std::max<int64_t>(1, time / kRowBlock);
  for (int64_t blk = 0; blk < blocks; ++blk) f(time * blk / blocks, time * (blk + 1) / blocks);
}
}  // namespace

CausalSelfAttention::CausalSelfAttention(int64_t dim, int64_t heads, bool bias)
    : dim_(dim), heads_(heads), head_dim_(heads > 0 ? dim / heads : 0), bias_(bias) {
  if (dim_ <= 0 || dim_ > (int64_t(1) << 16) || heads_ <= 0 || dim_ % heads_ != 0)
    throw ConfigError(
        fmt::format("Attention(dim {}, heads {}): dim must be in [1, 65536] and a "
                    "multiple of heads",
                    dim_, heads_));
}

std::string CausalSelfAttention::describe() const {
  return fmt::format("Attention(dim {}, heads {}{})", dim_, heads_, bias_ ? "" : ", no bias");
}

Shape CausalSelfAttention::build(const Shape& input) {
  if (input.size() != 2 || input[1] != dim_ || input[0] <= 0)
    throw ConfigError(
        fmt::format("{}: input {} is not [time, {}]", describe(), shape_text(input), dim_));
  if (input[0] > (int64_t(1) << 14))
    throw ConfigError(
        fmt::format("{}: {} positions is more than the 16384 this layer's "
                    "[time, time] probabilities allow",
                    describe(), input[0]));
  time_ = input[0];
  return input;
}

int64_t CausalSelfAttention::num_params() const {
  return 4 * dim_ * dim_ + (bias_ ? 4 * dim_ : 0);
}

std::vector<std::array<int64_t, 2>> CausalSelfAttention::param_matrices() const {
  if (!bias_) return {{3 * dim_, dim_}, {dim_, dim_}};
  return {{3 * dim_, dim_}, {1, 3 * dim_}, {dim_, dim_}, {1, dim_}};
}

void CausalSelfAttention::bind(float* params, float* grads) {
  const int64_t in = 3 * dim_ * dim_;
  w_in_ = params;
  dw_in_ = grads;
  int64_t at = in;
  if (bias_) {
    b_in_ = params + at;
    db_in_ = grads + at;
    at += 3 * dim_;
  }
  w_out_ = params + at;
  dw_out_ = grads + at;
  at += dim_ * dim_;
  if (bias_) {
    b_out_ = params + at;
    db_out_ = grads + at;
  }
}

void CausalSelfAttention::init_params(Rng& rng, Backend& backend) {
  std::vector<float> host(static_cast<size_t>(num_params()), 0.0f);
  // Xavier-uniform over the [3 dim, dim] matrix: fan_in dim, fan_out 3 dim.
  const float in_bound = std::sqrt(6.0f / float(dim_ + 3 * dim_));
  size_t at = 0;
  for (int64_t i = 0; i < 3 * dim_ * dim_; ++i)
    host[at++] = (2.0f * rng.uniform() - 1.0f) * in_bound;
  if (bias_) at += size_t(3 * dim_);
  const float out_bound = 1.0f / std::sqrt(float(dim_));
  for (int64_t i = 0; i < dim_ * dim_; ++i) host[at++] = (2.0f * rng.uniform() - 1.0f) * out_bound;
  backend.copy_to_device(w_in_, host.data(), host.size() * sizeof(float));
}

int64_t CausalSelfAttention::flops_per_sample() const {
  const int64_t projections = 2 * time_ * dim_ * 3 * dim_ + 2 * time_ * dim_ * dim_;
  const int64_t scores = 2 * time_ * time_ * dim_;    // Q K^T over all heads
  const int64_t weighted = 2 * time_ * time_ * dim_;  // P V over all heads
  return projections + scores + weighted;
}

int64_t CausalSelfAttention::saved_floats_per_sample() const {
  return 3 * time_ * dim_ + heads_ * time_ * time_ + time_ * dim_;
}

void CausalSelfAttention::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t T = time_, D = dim_, H = heads_, dh = head_dim_, rows = batch * T;
  if (qkv_.size() < rows * 3 * D) {
    qkv_ = DeviceBuffer<float>(be, rows * 3 * D);
    probs_ = DeviceBuffer<float>(be, batch * H * T * T);
    heads_out_ = DeviceBuffer<float>(be, rows * D);
  }
  float* qkv = qkv_.data();
  be.gemm(false, true, rows, 3 * D, D, 1.0f, x, D, w_in_, D, 0.0f, qkv, 3 * D);
  if (bias_) be.add_bias(qkv, b_in_, rows, 3 * D);
  const float scale = 1.0f / std::sqrt(float(dh));
  for (int64_t b = 0; b < batch; ++b) {
    // Head h of sample b: Q_h at column h dh of Q, K_h and V_h likewise; rows 3 D apart. Rows
    // r0..r1 see keys 0..r1 only: the scores right of that are never read (the causal softmax
    // reads entries 0..i of row i and writes the rest as zero).
    const float* q = qkv + b * T * 3 * D;
    float* p = probs_.data() + b * H * T * T;
    for_row_blocks(T, [&](int64_t r0, int64_t r1) {
      be.gemm_batched(false, true, r1 - r0, r1, dh, scale, q + r0 * 3 * D, 3 * D, dh, q + D, 3 * D,
                      dh, 0.0f, p + r0 * T, T, T * T, H);
    });
  }
  be.causal_softmax_forward(probs_.data(), probs_.data(), batch * H, T);
  for (int64_t b = 0; b < batch; ++b) {
    const float* v = qkv + b * T * 3 * D + 2 * D;
    const float* p = probs_.data() + b * H * T * T;
    float* out = heads_out_.data() + b * T * D;
    for_row_blocks(T, [&](int64_t r0, int64_t r1) {
      be.gemm_batched(false, false, r1 - r0, dh, r1, 1.0f, p + r0 * T, T, T * T, v, 3 * D, dh, 0.0f,
                      out + r0 * D, D, dh, H);
    });
  }
  be.gemm(false, true, rows, D, D, 1.0f, heads_out_.data(), D, w_out_, D, 0.0f, y, D);
  if (bias_) be.add_bias(y, b_out_, rows, D);
}

void CausalSelfAttention::backward(const Context& ctx, const float* x, const float* y,
                                   const float* dy, float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t T = time_, D = dim_, H = heads_, dh = head_dim_, rows = batch * T;
  if (dqkv_.size() < rows * 3 * D) {
    dheads_ = DeviceBuffer<float>(be, rows * D);
    dqkv_ = DeviceBuffer<float>(be, rows * 3 * D);
  }
  if (dscores_.size() < H * T * T) dscores_ = DeviceBuffer<float>(be, H * T * T);
  const float* qkv = qkv_.data();
  float* dqkv = dqkv_.data();
  float* dheads = dheads_.data();
  float* ds = dscores_.data();
  // Output projection: dW_out = dy^T heads, db_out = sum dy, dheads = dy W_out.
  be.gemm(true, false, D, D, rows, 1.0f, dy, D, heads_out_.data(), D, 0.0f, dw_out_, D);
  if (bias_) be.sum_rows(dy, db_out_, rows, D);
  be.gemm(false, false, rows, D, D, 1.0f, dy, D, w_out_, D, 0.0f, dheads, D);
  const float scale = 1.0f / std::sqrt(float(dh));
  for (int64_t b = 0; b < batch; ++b) {
    const float* q = qkv + b * T * 3 * D;
    const float* k = q + D;
    const float* v = q + 2 * D;
    const float* p = probs_.data() + b * H * T * T;
    const float* dout = dheads + b * T * D;
    float* dq = dqkv + b * T * 3 * D;
    // dP_h = dO_h V_h^T for rows r0..r1 against keys 0..r1 (the rest is masked);
    // dV_h = P_h^T dO_h, key block c0..c1 from rows c0..T (P is zero above the diagonal).
    for_row_blocks(T, [&](int64_t r0, int64_t r1) {
      be.gemm_batched(false, true, r1 - r0, r1, dh, 1.0f, dout + r0 * D, D, dh, v, 3 * D, dh, 0.0f,
                      ds + r0 * T, T, T * T, H);
      be.gemm_batched(true, false, r1 - r0, dh, T - r0, 1.0f, p + r0 * T + r0, T, T * T,
                      dout + r0 * D, D, dh, 0.0f, dq + 2 * D + r0 * 3 * D, 3 * D, dh, H);
    });
    // dS_h through the softmax (in place; zero above the diagonal), then dQ_h = scale dS_h K_h
    // and dK_h = scale dS_h^T Q_h, blocked the same two ways.
    be.causal_softmax_backward(p, ds, ds, H, T);
    for_row_blocks(T, [&](int64_t r0, int64_t r1) {
      be.gemm_batched(false, false, r1 - r0, dh, r1, scale, ds + r0 * T, T, T * T, k, 3 * D, dh,
                      0.0f, dq + r0 * 3 * D, 3 * D, dh, H);
      be.gemm_batched(true, false, r1 - r0, dh, T - r0, scale, ds + r0 * T + r0, T, T * T,
                      q + r0 * 3 * D, 3 * D, dh, 0.0f, dq + D + r0 * 3 * D, 3 * D, dh, H);
    });
  }
  // Input projection: dW_in = dqkv^T x, db_in = sum dqkv, dx = dqkv W_in.
  be.gemm(true, false, 3 * D, D, rows, 1.0f, dqkv, 3 * D, x, D, 0.0f, dw_in_, D);
  if (bias_) be.sum_rows(dqkv, db_in_, rows, 3 * D);
  if (dx) be.gemm(false, false, rows, D, 3 * D, 1.0f, dqkv, 3 * D, w_in_, D, 0.0f, dx, D);
}

}  // namespace loom::nn
