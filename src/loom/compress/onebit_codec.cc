#include "loom/compress/onebit_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/compress/half.h"
#include "loom/core/cpu_features.h"
#include "loom/core/error.h"

#if defined(__AVX2__)
#include <immintrin.h>
#define LOOM_COMPRESS_AVX2 1
#endif

namespace loom::compress {
namespace {

constexpr size_t kLanes = 16;  // partial sums per side (see the header)

// The fixed order in which the 16 partial sums are combined (see the header).
inline float combine16(const float* l) {
  float m[8];
  for (size_t j = 0; j < 8; ++j) m[j] = l[j] + l[j + 8];
  return ((m[0] + m[1]) + (m[2] + m[3])) + ((m[4] + m[5]) + (m[6] + m[7]));
}

inline OnebitLevels levels_from(const float* sum_neg, const float* sum_pos, size_t cnt_neg,
                                size_t cnt_pos) {
  OnebitLevels lv;
  lv.neg = cnt_neg ? combine16(sum_neg) / float(cnt_neg) : 0.0f;
  lv.pos = cnt_pos ? combine16(sum_pos) / float(cnt_pos) : 0.0f;
  return lv;
}

// The levels of one column whose sums s are in place: element i goes to partial sum i % 16 of
// its sign. The reference encoder, and the AVX-512 one for a column holding a NaN or Inf.
OnebitLevels column_levels_ref(const float* s, size_t len) {
  float sum_neg[kLanes] = {}, sum_pos[kLanes] = {};
  size_t cnt_neg = 0;
  for (size_t i = 0; i < len; ++i) {
    if (s[i] < 0.0f) {
      sum_neg[i % kLanes] += s[i];
      ++cnt_neg;
    } else {
      sum_pos[i % kLanes] += s[i];
    }
  }
  return levels_from(sum_neg, sum_pos, cnt_neg, len - cnt_neg);
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
    for (size_t i = c0; i < c1; ++i) {
      float s = g[i] + r[i];
      ok &= is_finite_bits(s);
      r[i] = s;
    }
    OnebitLevels lv = column_levels_ref(r + c0, c1 - c0);
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
bool onebit_encode_avx2(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                        uint32_t* words) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256 zero = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  bool ok = true;
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    size_t len = std::min(n - c0, column);
    size_t vec = len & ~size_t(15);
    const float* gc = g + c0;
    float* rc = r + c0;
    // vneg[h] / vpos[h]: partial sums 8 h .. 8 h + 7 of each side
    __m256 vneg[2] = {zero, zero}, vpos[2] = {zero, zero};
    __m256i vcnt = _mm256_setzero_si256();
    for (size_t i = 0; i < vec; i += 16) {
      for (int h = 0; h < 2; ++h) {
        const size_t j = i + 8 * size_t(h);
        __m256 s = _mm256_add_ps(_mm256_loadu_ps(gc + j), _mm256_loadu_ps(rc + j));
        __m256i e = _mm256_and_si256(_mm256_castps_si256(s), exp_mask);
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));
        _mm256_storeu_ps(rc + j, s);
        __m256 m = _mm256_cmp_ps(s, zero, _CMP_LT_OQ);
        vneg[h] = _mm256_add_ps(vneg[h], _mm256_and_ps(m, s));
        vpos[h] = _mm256_add_ps(vpos[h], _mm256_andnot_ps(m, s));
        vcnt = _mm256_sub_epi32(vcnt, _mm256_castps_si256(m));
      }
    }
    alignas(32) float sum_neg[kLanes], sum_pos[kLanes];
    alignas(32) int32_t cnt[8];
    for (int h = 0; h < 2; ++h) {
      _mm256_store_ps(sum_neg + 8 * h, vneg[h]);
      _mm256_store_ps(sum_pos + 8 * h, vpos[h]);
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(cnt), vcnt);
    size_t cnt_neg = 0;
    for (int32_t c : cnt) cnt_neg += size_t(c);
    for (size_t i = vec; i < len; ++i) {
      float s = gc[i] + rc[i];
      ok &= is_finite_bits(s);
      rc[i] = s;
      if (s < 0.0f) {
        sum_neg[i % kLanes] += s;
        ++cnt_neg;
      } else {
        sum_pos[i % kLanes] += s;
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
        __m256 m = _mm256_cmp_ps(s, zero, _CMP_NLT_UQ);  // !(s < 0): a NaN gets bit 1
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

void onebit_decode_avx2(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
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

// AVX-512 (F, BW, DQ, VL) encode. The partial sums are a chain of one add per 16 elements per
// side that no reordering may shorten (their order decides the levels' bits), so the kernel keeps
// the reference's two passes per column and runs pass 1 of the next column in the same loop as
// pass 2 of this one: pass 2's work fills the chain's latency. Pass 1 stores s into r as the
// reference does; against recomputing s from g and r in pass 2, or two columns side by side
// (two chains), that one stream through memory measured fastest on buffers beyond L2 and with
// pointers off 64-byte alignment.
//
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized reports; nothing uninitialised is read.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define LOOM_ONEBIT512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,popcnt")))

namespace {

// One column's pass-1 state: the 16 partial sums of each side (lane k: elements k, k + 16, ...);
// neg counts the entries < 0.
struct ColumnSums {
  __m512 neg_sums, pos_sums;
  size_t neg;
};

LOOM_ONEBIT512 inline ColumnSums no_sums() {
  return {_mm512_setzero_ps(), _mm512_setzero_ps(), 0};
}

// min(+0, s) is s where s < 0 and a zero elsewhere, max(+0, s) s where s >= 0: what the
// reference adds to each side's lane, or a zero, which changes no partial sum (a sum that
// starts at +0 and adds values of one sign is never -0, and +0 + -0 is +0). With +0 as the first
// operand both return s when s is NaN (vminps/vmaxps return the second operand then, and for
// two zeros), so a NaN leaves the sums NaN and sends the column to the reference's sums
// (column_levels), as +Inf and -Inf do on their sides.
LOOM_ONEBIT512 inline void add_to_sums(__m512 s, ColumnSums& a) {
  const __m512 zero = _mm512_setzero_ps();
  a.neg += _mm_popcnt_u32(_cvtmask16_u32(_mm512_cmp_ps_mask(s, zero, _CMP_LT_OQ)));
  a.neg_sums = _mm512_add_ps(a.neg_sums, _mm512_min_ps(zero, s));
  a.pos_sums = _mm512_add_ps(a.pos_sums, _mm512_max_ps(zero, s));
}

// Pass 1 over 16 elements: r = s = g + r, and s into the sums.
LOOM_ONEBIT512 inline void pass1_16(const float* g, float* r, ColumnSums& a) {
  const __m512 s = _mm512_add_ps(_mm512_loadu_ps(g), _mm512_loadu_ps(r));
  _mm512_storeu_ps(r, s);
  add_to_sums(s, a);
}

// combine16 of the negatives' sums into lane 0 and of the others' into lane 8: the same
// additions, each with the same two operands, as combine16.
LOOM_ONEBIT512 inline __m512 combine16x2(__m512 neg, __m512 pos) {
  // lanes 0..7: neg[j] + neg[j + 8]; lanes 8..15: pos[j] + pos[j + 8]
  const __m512 l =
      _mm512_add_ps(_mm512_shuffle_f32x4(neg, pos, 0x44), _mm512_shuffle_f32x4(neg, pos, 0xee));
  const __m512 a = _mm512_add_ps(l, _mm512_permute_ps(l, 0xb1));  // 2j: l[2j] + l[2j+1]
  const __m512 b = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4e));  // 4j: a[4j] + a[4j+2]
  return _mm512_add_ps(b, _mm512_shuffle_f32x4(b, b, 0xb1));      // 8j: b[8j] + b[8j+4]
}

// The levels after pass 1 over a column of len elements (s in r). A NaN or Inf in s leaves a
// sum non-finite (+Inf and NaNs stay in theirs, -Inf in the negatives'); a non-finite sum of
// finite s is an overflow, which the reference's sums share.
LOOM_ONEBIT512 inline OnebitLevels column_levels(const ColumnSums& a, const float* s, size_t len,
                                                 bool& ok) {
  const __m512 t = combine16x2(a.neg_sums, a.pos_sums);
  const float neg = _mm512_cvtss_f32(t), pos = _mm_cvtss_f32(_mm512_extractf32x4_ps(t, 2));
  if (!is_finite_bits(neg) || !is_finite_bits(pos)) {
    bool finite = true;
    for (size_t i = 0; i < len; ++i) finite &= is_finite_bits(s[i]);
    if (!finite) {
      ok = false;
      return column_levels_ref(s, len);
    }
  }
  return {a.neg ? neg / float(a.neg) : 0.0f, a.neg < len ? pos / float(len - a.neg) : 0.0f};
}

// Pass 1 over a whole column of len elements, any len.
LOOM_ONEBIT512 OnebitLevels column_pass1(const float* g, float* r, size_t len, bool& ok) {
  ColumnSums a = no_sums();
  size_t i = 0;
  for (; i + 16 <= len; i += 16) pass1_16(g + i, r + i, a);
  if (i < len) {  // the short last column's last elements: +0 past its end adds nothing
    const __mmask16 m = __mmask16((1u << (len - i)) - 1);
    const __m512 s =
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, r + i));
    _mm512_mask_storeu_ps(r + i, m, s);
    add_to_sums(s, a);
  }
  return column_levels(a, r, len, ok);
}

// Pass 2 over 16 elements (those of mask m): r = s - level; returns the sign bits (1 = s >= 0).
LOOM_ONEBIT512 inline __mmask16 pass2_16(float* r, __mmask16 m, __m512 lneg, __m512 lpos) {
  const __m512 s = _mm512_maskz_loadu_ps(m, r);
  const __mmask16 p = _mm512_mask_cmp_ps_mask(m, s, _mm512_setzero_ps(), _CMP_NLT_UQ);
  _mm512_mask_storeu_ps(r, m, _mm512_sub_ps(s, _mm512_mask_blend_ps(p, lneg, lpos)));
  return p;
}

// Pass 2 over 32 elements of a whole word.
LOOM_ONEBIT512 inline void pass2_32(float* r, __m512 lneg, __m512 lpos, uint32_t* w) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 s0 = _mm512_loadu_ps(r), s1 = _mm512_loadu_ps(r + 16);
  const __mmask16 p0 = _mm512_cmp_ps_mask(s0, zero, _CMP_NLT_UQ);  // !(s < 0), NaN included
  const __mmask16 p1 = _mm512_cmp_ps_mask(s1, zero, _CMP_NLT_UQ);
  _mm512_storeu_ps(r, _mm512_sub_ps(s0, _mm512_mask_blend_ps(p0, lneg, lpos)));
  _mm512_storeu_ps(r + 16, _mm512_sub_ps(s1, _mm512_mask_blend_ps(p1, lneg, lpos)));
  _store_mask32(reinterpret_cast<__mmask32*>(w), _mm512_kunpackw(p1, p0));
}

// The masks of the first n (< 32) of 32 elements, 16 each.
inline void tail_masks(size_t n, __mmask16& m0, __mmask16& m1) {
  m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
  m1 = n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
}

LOOM_ONEBIT512 void column_pass2(float* r, size_t len, __m512 lneg, __m512 lpos, uint32_t* w) {
  size_t i = 0;
  for (; i + 32 <= len; i += 32) pass2_32(r + i, lneg, lpos, w + i / 32);
  if (i < len) {  // the last word: bits past n stay 0
    __mmask16 m0, m1;
    tail_masks(len - i, m0, m1);
    const uint32_t lo = _cvtmask16_u32(pass2_16(r + i, m0, lneg, lpos));
    const uint32_t hi = _cvtmask16_u32(pass2_16(r + i + 16, m1, lneg, lpos));
    w[i / 32] = lo | hi << 16;
  }
}

LOOM_ONEBIT512 bool onebit_encode_avx512(const float* g, float* r, size_t n, size_t column,
                                         OnebitLevels* levels, uint32_t* words) {
  if (n == 0) return true;
  bool ok = true;
  OnebitLevels lv = column_pass1(g, r, std::min(n, column), ok);
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    const size_t len = std::min(n - c0, column), c1 = c0 + column;
    levels[ci] = lv;
    const __m512 lneg = _mm512_set1_ps(lv.neg), lpos = _mm512_set1_ps(lv.pos);
    uint32_t* wc = words + c0 / 32;    // column is a multiple of 32: columns start on a word
    if (c1 < n && n - c1 >= column) {  // the next column is whole, and so is this one
      ColumnSums a = no_sums();
      for (size_t i = 0; i < column; i += 32) {
        pass1_16(g + c1 + i, r + c1 + i, a);
        pass1_16(g + c1 + i + 16, r + c1 + i + 16, a);
        pass2_32(r + c0 + i, lneg, lpos, wc + i / 32);
      }
      lv = column_levels(a, r + c1, column, ok);
    } else {
      column_pass2(r + c0, len, lneg, lpos, wc);
      if (c1 < n) lv = column_pass1(g + c1, r + c1, n - c1, ok);  // the short last column
    }
  }
  return ok;
}

// Decode: each 16 sign bits become a mask (a broadcast word tested against one bit per lane)
// that picks a level per element.
template <DecodeMode kMode>
LOOM_ONEBIT512 inline void decode_16(float* o, __mmask16 bits, __mmask16 m, __m512 lneg,
                                     __m512 lpos) {
  __m512 v = _mm512_mask_blend_ps(bits, lneg, lpos);
  if (kMode == DecodeMode::kAccumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), v);
  _mm512_mask_storeu_ps(o, m, v);
}

template <DecodeMode kMode>
LOOM_ONEBIT512 void onebit_decode_avx512(const OnebitLevels* levels, const uint32_t* words,
                                         size_t n, size_t column, float* out) {
  const __m512i bit_lo =
      _mm512_setr_epi32(1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8,
                        1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15);
  const __m512i bit_hi = _mm512_slli_epi32(bit_lo, 16);
  for (size_t c0 = 0, ci = 0; c0 < n; c0 += column, ++ci) {
    const size_t len = std::min(n - c0, column);
    const __m512 lneg = _mm512_set1_ps(levels[ci].neg), lpos = _mm512_set1_ps(levels[ci].pos);
    const uint32_t* wc = words + c0 / 32;
    float* oc = out + c0;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
      const __m512i w = _mm512_set1_epi32(int32_t(wc[i / 32]));
      __m512 v0 = _mm512_mask_blend_ps(_mm512_test_epi32_mask(w, bit_lo), lneg, lpos);
      __m512 v1 = _mm512_mask_blend_ps(_mm512_test_epi32_mask(w, bit_hi), lneg, lpos);
      if (kMode == DecodeMode::kAccumulate) {
        v0 = _mm512_add_ps(_mm512_loadu_ps(oc + i), v0);
        v1 = _mm512_add_ps(_mm512_loadu_ps(oc + i + 16), v1);
      }
      _mm512_storeu_ps(oc + i, v0);
      _mm512_storeu_ps(oc + i + 16, v1);
    }
    if (i < len) {
      __mmask16 m0, m1;
      tail_masks(len - i, m0, m1);
      const __m512i w = _mm512_set1_epi32(int32_t(wc[i / 32]));
      decode_16<kMode>(oc + i, _mm512_test_epi32_mask(w, bit_lo), m0, lneg, lpos);
      decode_16<kMode>(oc + i + 16, _mm512_test_epi32_mask(w, bit_hi), m1, lneg, lpos);
    }
  }
}

}  // namespace

#pragma GCC diagnostic pop

bool onebit_have_avx512() {
  return cpu_has_avx512();
}

bool onebit_encode(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                   uint32_t* words) {
  if (cpu_has_avx512()) return onebit_encode_avx512(g, r, n, column, levels, words);
  return onebit_encode_avx2(g, r, n, column, levels, words);
}

void onebit_decode(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                   float* out, DecodeMode mode) {
  if (!cpu_has_avx512()) {
    onebit_decode_avx2(levels, words, n, column, out, mode);
  } else if (mode == DecodeMode::kAccumulate) {
    onebit_decode_avx512<DecodeMode::kAccumulate>(levels, words, n, column, out);
  } else {
    onebit_decode_avx512<DecodeMode::kWrite>(levels, words, n, column, out);
  }
}
#else
bool onebit_have_avx512() {
  return false;
}
bool onebit_encode_avx2(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                        uint32_t* words) {
  return onebit_encode_ref(g, r, n, column, levels, words);
}
void onebit_decode_avx2(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                        float* out, DecodeMode mode) {
  onebit_decode_ref(levels, words, n, column, out, mode);
}
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

// What onebit_encode writes: per column the mean of the negative entries (<= 0, 0 if none) and of
// the others (>= 0), finite; the sign bits past element n are zero.
void OnebitCodec::check_payload_impl(const std::byte* in, size_t n, const std::string& what) const {
  const auto* levels = reinterpret_cast<const OnebitLevels*>(in);
  const size_t columns = columns_for(n, column_);
  for (size_t c = 0; c < columns; ++c) {
    const OnebitLevels& lv = levels[c];
    if (!(std::isfinite(lv.neg) && std::isfinite(lv.pos) && lv.neg <= 0.0f && lv.pos >= 0.0f))
      payload_error(what, name(), n,
                    fmt::format("column {} has levels neg {} and pos {} (a mean of negative "
                                "entries <= 0, of the others >= 0)",
                                c, lv.neg, lv.pos));
  }
  const auto* words = reinterpret_cast<const uint32_t*>(in + columns * sizeof(OnebitLevels));
  if (n % 32 != 0 && (words[n / 32] >> (n % 32)) != 0)
    payload_error(what, name(), n, "sign bits past the last element are set");
}

}  // namespace loom::compress
