#include "loom/compress/powersgd_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/compress/half.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"

namespace loom::compress {

MatrixShape powersgd_shape(size_t n, size_t cols_hint, size_t rank) {
  MatrixShape s;
  if (n == 0) return s;
  s.cols = cols_hint ? std::min(cols_hint, n) : size_t(std::ceil(std::sqrt(double(n))));
  s.rows = (n + s.cols - 1) / s.cols;
  s.rank = std::min({rank, s.rows, s.cols});
  return s;
}

// The loops stream M once, row by row; P's row and all of Q (cols x r) stay in cache.
void powersgd_mul_q(const float* m, size_t n, const MatrixShape& s, const float* q, float* p) {
  const size_t r = s.rank;
  std::fill(p, p + s.rows * r, 0.0f);
  for (size_t i = 0; i < s.rows; ++i) {
    size_t c_end = std::min(s.cols, n - i * s.cols);
    const float* mi = m + i * s.cols;
    float* pi = p + i * r;
    for (size_t c = 0; c < c_end; ++c)
      for (size_t j = 0; j < r; ++j) pi[j] += mi[c] * q[c * r + j];
  }
}

void powersgd_mul_p(const float* m, size_t n, const MatrixShape& s, const float* p, float* q) {
  const size_t r = s.rank;
  std::fill(q, q + s.cols * r, 0.0f);
  for (size_t i = 0; i < s.rows; ++i) {
    size_t c_end = std::min(s.cols, n - i * s.cols);
    const float* mi = m + i * s.cols;
    const float* pi = p + i * r;
    for (size_t c = 0; c < c_end; ++c)
      for (size_t j = 0; j < r; ++j) q[c * r + j] += mi[c] * pi[j];
  }
}

void powersgd_expand(const float* p, const float* q, size_t n, const MatrixShape& s, float* out,
                     DecodeMode mode, float sign) {
  const size_t r = s.rank;
  for (size_t i = 0; i < s.rows; ++i) {
    size_t c_end = std::min(s.cols, n - i * s.cols);
    const float* pi = p + i * r;
    float* oi = out + i * s.cols;
    for (size_t c = 0; c < c_end; ++c) {
      float v = 0.0f;
      for (size_t j = 0; j < r; ++j) v += pi[j] * q[c * r + j];
      oi[c] = mode == DecodeMode::kWrite ? sign * v : oi[c] + sign * v;
    }
  }
}

void orthonormalise_columns(float* p, size_t rows, size_t rank) {
  for (size_t j = 0; j < rank; ++j) {
    for (size_t k = 0; k < j; ++k) {
      double dot = 0;
      for (size_t i = 0; i < rows; ++i) dot += double(p[i * rank + k]) * p[i * rank + j];
      for (size_t i = 0; i < rows; ++i) p[i * rank + j] -= float(dot) * p[i * rank + k];
    }
    double norm2 = 0;
    for (size_t i = 0; i < rows; ++i) norm2 += double(p[i * rank + j]) * p[i * rank + j];
    float inv = norm2 > 0 ? float(1.0 / std::sqrt(norm2)) : 0.0f;
    for (size_t i = 0; i < rows; ++i) p[i * rank + j] *= inv;
  }
}

void refill_zero_columns(float* q, size_t cols, size_t rank, uint64_t key) {
  for (size_t j = 0; j < rank; ++j) {
    bool zero = true;
    for (size_t c = 0; c < cols && zero; ++c) zero = q[c * rank + j] == 0.0f;
    if (!zero) continue;
    Rng rng(mix64(key ^ (j + 1)));
    for (size_t c = 0; c < cols; ++c) q[c * rank + j] = rng.normal();
  }
}

void powersgd_step_ref(const float* m, size_t n, const MatrixShape& s, const float* q_in,
                       float* approx, float* q_out) {
  const size_t R = s.rows, C = s.cols, r = s.rank;
  auto M = [&](size_t i, size_t c) { return i * C + c < n ? double(m[i * C + c]) : 0.0; };
  std::vector<double> P(R * r, 0.0), Q(C * r, 0.0);
  for (size_t i = 0; i < R; ++i)
    for (size_t j = 0; j < r; ++j)
      for (size_t c = 0; c < C; ++c) P[i * r + j] += M(i, c) * q_in[c * r + j];
  for (size_t j = 0; j < r; ++j) {  // classical Gram-Schmidt against the finished columns
    for (size_t k = 0; k < j; ++k) {
      double dot = 0;
      for (size_t i = 0; i < R; ++i) dot += P[i * r + k] * P[i * r + j];
      for (size_t i = 0; i < R; ++i) P[i * r + j] -= dot * P[i * r + k];
    }
    double norm = 0;
    for (size_t i = 0; i < R; ++i) norm += P[i * r + j] * P[i * r + j];
    norm = std::sqrt(norm);
    for (size_t i = 0; i < R; ++i) P[i * r + j] = norm > 0 ? P[i * r + j] / norm : 0.0;
  }
  for (size_t c = 0; c < C; ++c)
    for (size_t j = 0; j < r; ++j)
      for (size_t i = 0; i < R; ++i) Q[c * r + j] += M(i, c) * P[i * r + j];
  for (size_t x = 0; x < n; ++x) {
    size_t i = x / C, c = x % C;
    double v = 0;
    for (size_t j = 0; j < r; ++j) v += P[i * r + j] * Q[c * r + j];
    approx[x] = float(v);
  }
  for (size_t x = 0; x < C * r; ++x) q_out[x] = float(Q[x]);
}

PowerSgdCodec::PowerSgdCodec(size_t rank, size_t cols, uint64_t seed)
    : rank_(rank), cols_(cols), seed_(seed) {
  LOOM_CHECK_GE(rank, size_t(1));
}

size_t PowerSgdCodec::encoded_bytes(size_t n) const {
  MatrixShape s = shape(n);
  return (s.rows + s.cols) * s.rank * sizeof(float);
}

uint64_t PowerSgdCodec::refill_key(const CodecState& state, size_t block) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the bucket name: same on every rank
  for (char ch : state.bucket) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  return derive_key(seed_, 0, RngPurpose::kCodec, h ^ state.steps) ^ (uint64_t(block) << 40);
}

PowerSgdPlan PowerSgdCodec::plan(const CodecState& state) const {
  PowerSgdPlan plan;
  auto add = [&](size_t offset, size_t n, MatrixShape s) {
    plan.blocks.push_back({offset, n, s, plan.p_floats, plan.q_floats});
    plan.p_floats += s.rows * s.rank;
    plan.q_floats += s.cols * s.rank;
  };
  if (state.matrices.empty()) {
    if (state.n > 0) add(0, state.n, shape(state.n));
    return plan;
  }
  size_t offset = 0;
  for (const MatrixDims& d : state.matrices) {
    MatrixShape s{d.rows, d.cols, std::min({rank_, d.rows, d.cols})};
    if (d.rows * d.cols > 0) add(offset, d.rows * d.cols, s);
    offset += d.rows * d.cols;
  }
  return plan;
}

CodecState PowerSgdCodec::make_state(size_t n, const std::string& bucket) const {
  return make_state(n, bucket, {});
}

CodecState PowerSgdCodec::make_state(size_t n, const std::string& bucket,
                                     std::span<const MatrixDims> matrices) const {
  CodecState st = Codec::make_state(n, bucket);
  st.matrices.assign(matrices.begin(), matrices.end());
  size_t total = 0;
  for (const MatrixDims& d : matrices) total += d.rows * d.cols;
  LOOM_CHECK(matrices.empty() || total == n,
             "powersgd: the matrices of {} hold {} elements, not {}", bucket, total, n);
  const PowerSgdPlan p = plan(st);
  st.aux.assign(p.q_floats, 0.0f);
  for (size_t b = 0; b < p.blocks.size(); ++b)
    refill_zero_columns(st.aux.data() + p.blocks[b].q, p.blocks[b].s.cols, p.blocks[b].s.rank,
                        refill_key(st, b));
  return st;
}

bool PowerSgdCodec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  const size_t n = state.n;
  MatrixShape s = shape(n);
  float* m = state.residual.data();
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    m[i] += grad[i];
    bad |= uint32_t(!is_finite_bits(m[i]));
  }
  if (bad) return false;
  if (n == 0) return true;
  LOOM_CHECK(state.matrices.empty(), "powersgd: encode() of {} uses the default view only",
             state.bucket);
  float* p = reinterpret_cast<float*>(out);
  float* q = p + s.rows * s.rank;
  refill_zero_columns(state.aux.data(), s.cols, s.rank, refill_key(state));
  powersgd_mul_q(m, n, s, state.aux.data(), p);
  orthonormalise_columns(p, s.rows, s.rank);
  powersgd_mul_p(m, n, s, p, q);
  std::copy(q, q + s.cols * s.rank, state.aux.begin());            // warm start for the next step
  powersgd_expand(p, q, n, s, m, DecodeMode::kAccumulate, -1.0f);  // residual = M - P Q^T
  return true;
}

void PowerSgdCodec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  MatrixShape s = shape(n);
  if (n == 0) return;
  const float* p = reinterpret_cast<const float*>(in);
  powersgd_expand(p, p + s.rows * s.rank, n, s, out, mode);
}

// The factors P and Q are finite (decode_checked then checks that their products are too).
void PowerSgdCodec::check_payload_impl(const std::byte* in, size_t n,
                                       const std::string& what) const {
  const MatrixShape s = shape(n);
  const auto* f = reinterpret_cast<const float*>(in);
  const size_t p_floats = s.rows * s.rank, floats = (s.rows + s.cols) * s.rank;
  for (size_t i = 0; i < floats; ++i) {
    if (!std::isfinite(f[i]))
      payload_error(what, name(), n,
                    fmt::format("{} factor element {} is {}", i < p_floats ? "P" : "Q",
                                i < p_floats ? i : i - p_floats, f[i]));
  }
}

}  // namespace loom::compress
