#include "loom/compress/onebit_codec.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"
#include "loom/core/error.h"

#if defined(__AVX2__)
#include <immintrin.h>
#define LOOM_COMPRESS_AVX2 1
#endif

namespace loom::compress {
namespace {

// The fixed order in which the 8 partial sums are combined (see the header).
inline float combine8(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

inline OnebitLevels levels_from(const float* sum_neg, const float* sum_pos, size_t cnt_neg,
                                size_t cnt_pos) {
  OnebitLevels lv;
  lv.neg = cnt_neg ? combine8(sum_neg) / float(cnt_neg) : 0.0f;
  lv.pos = cnt_pos ? combine8(sum_pos) / float(cnt_pos) : 0.0f;
  return lv;
}

size_t words_for(size_t n) {
  return (n + 31) / 32;
}
size_t columns_for(size_t n, size_t column) {
  return (n + column - 1) / column;
}

}  // namespace

bool onebit_encode_ref(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                       uint32_t* words) {
  bool ok = true;
  std::fill(words, words + words_for(n), 0u);
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    size_t c1 = std::min(n, c0 + column);
    float sum_neg[8] = {}, sum_pos[8] = {};
    size_t cnt_neg = 0, cnt_pos = 0;
    for (size_t i = c0; i < c1; ++i) {
      float s = g[i] + r[i];
      ok &= is_finite_bits(s);
      r[i] = s;
      if (s < 0.0f) {
        sum_neg[(i - c0) % 8] += s;
        ++cnt_neg;
      } else {
        sum_pos[(i - c0) % 8] += s;
        ++cnt_pos;
      }
    }
    OnebitLevels lv = levels_from(sum_neg, sum_pos, cnt_neg, cnt_pos);
    levels[ci] = lv;
    for (size_t i = c0; i < c1; ++i) {
      bool bit = !(r[i] < 0.0f);
      words[i / 32] |= uint32_t(bit) << (i % 32);
      r[i] = r[i] - (bit ? lv.pos : lv.neg);
    }
  }
  return ok;
}

void onebit_decode_ref(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                       float* out, DecodeMode mode) {
  for (size_t i = 0; i < n; ++i) {
    const OnebitLevels& lv = levels[i / column];
    float v = (words[i / 32] >> (i % 32)) & 1u ? lv.pos : lv.neg;
    out[i] = mode == DecodeMode::kWrite ? v : out[i] + v;
  }
}

#if LOOM_COMPRESS_AVX2
bool onebit_encode(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                   uint32_t* words) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256 zero = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  bool ok = true;
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    size_t len = std::min(n - c0, column);
    size_t vec = len & ~size_t(7);
    const float* gc = g + c0;
    float* rc = r + c0;
    __m256 vneg = zero, vpos = zero;
    __m256i vcnt = _mm256_setzero_si256();
    for (size_t i = 0; i < vec; i += 8) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(gc + i), _mm256_loadu_ps(rc + i));
      __m256i e = _mm256_and_si256(_mm256_castps_si256(s), exp_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));
      _mm256_storeu_ps(rc + i, s);
      __m256 m = _mm256_cmp_ps(s, zero, _CMP_LT_OQ);
      vneg = _mm256_add_ps(vneg, _mm256_and_ps(m, s));
      vpos = _mm256_add_ps(vpos, _mm256_andnot_ps(m, s));
      vcnt = _mm256_sub_epi32(vcnt, _mm256_castps_si256(m));
    }
    alignas(32) float sum_neg[8], sum_pos[8];
    alignas(32) int32_t cnt[8];
    _mm256_store_ps(sum_neg, vneg);
    _mm256_store_ps(sum_pos, vpos);
    _mm256_store_si256(reinterpret_cast<__m256i*>(cnt), vcnt);
    size_t cnt_neg = 0;
    for (int32_t c : cnt) cnt_neg += size_t(c);
    for (size_t i = vec; i < len; ++i) {
      float s = gc[i] + rc[i];
      ok &= is_finite_bits(s);
      rc[i] = s;
      if (s < 0.0f) {
        sum_neg[i % 8] += s;
        ++cnt_neg;
      } else {
        sum_pos[i % 8] += s;
      }
    }
    OnebitLevels lv = levels_from(sum_neg, sum_pos, cnt_neg, len - cnt_neg);
    levels[ci] = lv;
    const __m256 lneg = _mm256_set1_ps(lv.neg), lpos = _mm256_set1_ps(lv.pos);
    uint32_t* wc = words + c0 / 32;  // column is a multiple of 32: columns start on a word
    size_t full = len & ~size_t(31);
    for (size_t i = 0; i < full; i += 32) {
      uint32_t word = 0;
      for (int k = 0; k < 4; ++k) {
        __m256 s = _mm256_loadu_ps(rc + i + 8 * k);
        __m256 m = _mm256_cmp_ps(s, zero, _CMP_GE_OQ);
        word |= uint32_t(_mm256_movemask_ps(m)) << (8 * k);
        _mm256_storeu_ps(rc + i + 8 * k, _mm256_sub_ps(s, _mm256_blendv_ps(lneg, lpos, m)));
      }
      wc[i / 32] = word;
    }
    if (full < len) {
      uint32_t word = 0;
      for (size_t i = full; i < len; ++i) {
        bool bit = !(rc[i] < 0.0f);
        word |= uint32_t(bit) << (i % 32);
        rc[i] = rc[i] - (bit ? lv.pos : lv.neg);
      }
      wc[full / 32] = word;
    }
  }
  return ok && _mm256_testz_si256(bad, bad);
}

void onebit_decode(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                   float* out, DecodeMode mode) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    size_t len = std::min(n - c0, column);
    const __m256 lneg = _mm256_set1_ps(levels[ci].neg), lpos = _mm256_set1_ps(levels[ci].pos);
    const uint32_t* wc = words + c0 / 32;
    float* oc = out + c0;
    size_t full = len & ~size_t(31);
    for (size_t i = 0; i < full; i += 32) {
      uint32_t word = wc[i / 32];
      for (int k = 0; k < 4; ++k) {
        __m256i b = _mm256_and_si256(_mm256_set1_epi32(int32_t((word >> (8 * k)) & 0xffu)), bit);
        __m256 m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, bit));
        __m256 v = _mm256_blendv_ps(lneg, lpos, m);
        float* o = oc + i + 8 * k;
        if (mode == DecodeMode::kAccumulate) v = _mm256_add_ps(_mm256_loadu_ps(o), v);
        _mm256_storeu_ps(o, v);
      }
    }
    for (size_t i = full; i < len; ++i) {
      float v = (wc[i / 32] >> (i % 32)) & 1u ? levels[ci].pos : levels[ci].neg;
      oc[i] = mode == DecodeMode::kWrite ? v : oc[i] + v;
    }
  }
}
#else
bool onebit_encode(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                   uint32_t* words) {
  return onebit_encode_ref(g, r, n, column, levels, words);
}
void onebit_decode(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                   float* out, DecodeMode mode) {
  onebit_decode_ref(levels, words, n, column, out, mode);
}
#endif

OnebitCodec::OnebitCodec(size_t column) : column_(column) {
  LOOM_CHECK(column >= 32 && column % 32 == 0, "onebit column {} is not a multiple of 32", column);
}

size_t OnebitCodec::encoded_bytes(size_t n) const {
  return columns_for(n, column_) * sizeof(OnebitLevels) + words_for(n) * sizeof(uint32_t);
}

bool OnebitCodec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  auto* levels = reinterpret_cast<OnebitLevels*>(out);
  auto* words = reinterpret_cast<uint32_t*>(out + columns_for(n, column_) * sizeof(OnebitLevels));
  return onebit_encode(grad, state.residual.data(), n, column_, levels, words);
}

void OnebitCodec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  auto* levels = reinterpret_cast<const OnebitLevels*>(in);
  auto* words =
      reinterpret_cast<const uint32_t*>(in + columns_for(n, column_) * sizeof(OnebitLevels));
  onebit_decode(levels, words, n, column_, out, mode);
}

}  // namespace loom::compress
