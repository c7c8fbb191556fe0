#include "loom/compress/topk_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "loom/compress/half.h"
#include "loom/core/error.h"

namespace loom::compress {

size_t topk_count(size_t n, double fraction) {
  if (n == 0) return 0;
  // The tiny slack keeps 0.01 * 100 (= 1.0000000000000002) at 1.
  double k = std::ceil(fraction * double(n) * (1.0 - 1e-12));
  return std::clamp<size_t>(size_t(k), 1, n);
}

bool topk_encode_ref(const float* g, float* r, size_t n, size_t k, TopkEntry* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    r[i] += g[i];
    ok &= is_finite_bits(r[i]);
  }
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    float ma = std::fabs(r[a]), mb = std::fabs(r[b]);
    return ma != mb ? ma > mb : a < b;
  });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  for (size_t j = 0; j < k; ++j) {
    out[j] = TopkEntry{idx[j], r[idx[j]]};
    r[idx[j]] = 0.0f;
  }
  return ok;
}

bool topk_encode(const float* g, float* r, size_t n, size_t k, TopkEntry* out,
                 std::vector<float>& scratch) {
  if (k == 0) return true;
  uint32_t bad = 0;
  scratch.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + r[i];
    bad |= uint32_t(!is_finite_bits(s));
    r[i] = s;
    scratch[i] = std::fabs(s);
  }
  if (bad) return false;
  std::nth_element(scratch.begin(), scratch.begin() + ptrdiff_t(n - k), scratch.end());
  const float thr = scratch[n - k];  // the k-th largest magnitude
  size_t above = 0;
  for (size_t i = 0; i < n; ++i) above += std::fabs(r[i]) > thr;
  size_t ties = k - above;  // entries equal to thr that are sent, lowest indices first
  size_t j = 0;
  for (size_t i = 0; i < n && j < k; ++i) {
    float m = std::fabs(r[i]);
    if (m > thr || (m == thr && ties > 0)) {
      if (m == thr) --ties;
      out[j++] = TopkEntry{uint32_t(i), r[i]};
      r[i] = 0.0f;
    }
  }
  return true;
}

void topk_decode(const TopkEntry* in, size_t k, size_t n, float* out, DecodeMode mode) {
  if (mode == DecodeMode::kWrite) std::fill(out, out + n, 0.0f);
  for (size_t j = 0; j < k; ++j) {
    LOOM_CHECK_LT(size_t(in[j].index), n);
    out[in[j].index] += in[j].value;
  }
}

TopkCodec::TopkCodec(double fraction) : fraction_(fraction) {
  LOOM_CHECK(fraction > 0.0 && fraction <= 1.0, "topk fraction {} not in (0, 1]", fraction);
}

bool TopkCodec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  LOOM_CHECK_LE(state.n, size_t(UINT32_MAX));
  return topk_encode(grad, state.residual.data(), state.n, topk_count(state.n, fraction_),
                     reinterpret_cast<TopkEntry*>(out), state.scratch);
}

void TopkCodec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  topk_decode(reinterpret_cast<const TopkEntry*>(in), topk_count(n, fraction_), n, out, mode);
}

// What topk_encode writes: k entries, indices below n and strictly ascending (each index at
// most once), finite values.
void TopkCodec::check_payload_impl(const std::byte* in, size_t n, const std::string& what) const {
  const auto* e = reinterpret_cast<const TopkEntry*>(in);
  const size_t k = topk_count(n, fraction_);
  for (size_t j = 0; j < k; ++j) {
    if (e[j].index >= n)
      payload_error(what, name(), n, fmt::format("entry {} has index {}", j, e[j].index));
    if (j > 0 && e[j].index <= e[j - 1].index)
      payload_error(what, name(), n,
                    fmt::format("entry {} has index {} after {} (indices ascend)", j, e[j].index,
                                e[j - 1].index));
    if (!std::isfinite(e[j].value))
      payload_error(what, name(), n,
                    fmt::format("entry {} (index {}) holds {}", j, e[j].index, e[j].value));
  }
}

}  // namespace loom::compress
