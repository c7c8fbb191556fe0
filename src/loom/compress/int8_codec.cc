#include "loom/compress/int8_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
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

// Per exponent level e = 0..6 (index 7 pads the 8-lane permutes).
alignas(32) constexpr float kScale[8] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e6f};
alignas(32) constexpr float kInvScale[8] = {1e0f, 1e-1f, 1e-2f, 1e-3f, 1e-4f, 1e-5f, 1e-6f, 0.0f};
// The top of the level below (q = 0): kInvScale[e + 1]; below level 6 there is only zero.
alignas(32) constexpr float kInvScaleBelow[8] = {1e-1f, 1e-2f, 1e-3f, 1e-4f,
                                                 1e-5f, 1e-6f, 0.0f,  0.0f};
alignas(32) constexpr float kCount[8] = {64, 32, 16, 8, 4, 2, 1, 1};  // m_e
// 0.9 / m_e (an exact power-of-two scaling of 0.9f).
alignas(32) const float kStep[8] = {0.9f / 64, 0.9f / 32, 0.9f / 16, 0.9f / 8,
                                    0.9f / 4,  0.9f / 2,  0.9f / 1,  0.9f / 1};
const float kInvStep = 1.0f / 0.9f;
constexpr float kThreshold[6] = {1e-1f, 1e-2f, 1e-3f, 1e-4f, 1e-5f, 1e-6f};

// The magnitude of (level e, step q in 0..m_e), in float arithmetic that the vector encoder
// repeats exactly, so it needs no table lookup: q = 0 is the top of the level below.
inline float magnitude(int e, float q) {
  return q == 0.0f ? kInvScaleBelow[e] : (0.1f + q * kStep[e]) * kInvScale[e];
}

std::array<float, 256> build_table() {
  std::array<float, 256> t{};
  for (int mi = 1; mi < 128; ++mi) {
    int e = 6 - (std::bit_width(unsigned(mi)) - 1);
    int m = 64 >> e;
    t[mi] = magnitude(e, float(mi - m + 1));  // the canonical (e, q) of index mi: q in 1..m_e
    t[mi | 0x80] = -t[mi];
  }
  t[0x80] = -0.0f;
  return t;
}

inline float inverse(float absmax) {
  return absmax > 0.0f ? 1.0f / absmax : 0.0f;
}

inline uint8_t encode_one_ref(float s, float inv) {
  float a = std::min(std::fabs(s) * inv, 1.0f);
  int e = 0;
  for (float th : kThreshold) e += a <= th;
  float t = a * kScale[e];
  float q = std::nearbyint(((t - 0.1f) * kInvStep) * kCount[e]);
  q = std::min(std::max(q, 0.0f), kCount[e]);
  int mi = int(q + (kCount[e] - 1.0f));  // m_e - 1 + q
  return uint8_t(mi | (std::signbit(s) ? 0x80 : 0));
}

}  // namespace

const std::array<float, 256>& int8_dynamic_tree_table() {
  static const std::array<float, 256> table = build_table();
  return table;
}

bool int8_encode_ref(const float* g, float* r, size_t n, size_t block, float* absmax,
                     uint8_t* codes) {
  const auto& table = int8_dynamic_tree_table();
  bool ok = true;
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    size_t b1 = std::min(n, b0 + block);
    float amax = 0.0f;
    for (size_t i = b0; i < b1; ++i) {
      float s = g[i] + r[i];
      ok &= is_finite_bits(s);
      r[i] = s;
      amax = std::max(amax, std::fabs(s));
    }
    absmax[bi] = amax;
    float inv = inverse(amax);
    for (size_t i = b0; i < b1; ++i) {
      uint8_t c = encode_one_ref(r[i], inv);
      codes[i] = c;
      r[i] = r[i] - table[c] * amax;
    }
  }
  return ok;
}

void int8_decode_ref(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                     DecodeMode mode) {
  const auto& table = int8_dynamic_tree_table();
  for (size_t i = 0; i < n; ++i) {
    float v = table[codes[i]] * absmax[i / block];
    out[i] = mode == DecodeMode::kWrite ? v : out[i] + v;
  }
}

#if LOOM_COMPRESS_AVX2
namespace {

// The level tops 10^-e indexed by the float exponent byte of m_e = 2^k (k = 6 - e): a
// permute reads the low 3 bits, (127 + k) mod 8, so k sits at slot (k + 7) mod 8.
alignas(32) constexpr float kInvScaleByK[8] = {1e-5f, 1e-4f, 1e-3f, 1e-2f,
                                               1e-1f, 1e0f,  0.0f,  1e-6f};

// table[c] * amax for 8 codes c (int32 lanes, 0..255), computed as build_table() does and
// without a gather: for mi = c & 0x7f, float(mi) = 2^k * 1.f exactly, so its exponent gives
// m_e = 2^k (e = 6 - k), q = mi - m_e + 1, and kStep[e] = 0.9f * 2^-k exactly (a power-of-two
// scaling), built from the exponent bits. mi = 0 is +-0.
inline __m256 decode8(__m256i c, __m256 amax) {
  const __m256i exp_bits = _mm256_set1_epi32(0x7f800000);
  __m256i mi = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
  __m256 mf = _mm256_cvtepi32_ps(mi);
  __m256i pow_bits = _mm256_and_si256(_mm256_castps_si256(mf), exp_bits);  // 2^k (0 if mi = 0)
  __m256 q = _mm256_add_ps(_mm256_sub_ps(mf, _mm256_castsi256_ps(pow_bits)), _mm256_set1_ps(1.0f));
  // 2^-k has exponent bits (127 - k) << 23 = (254 << 23) - pow_bits.
  __m256 inv_pow = _mm256_castsi256_ps(_mm256_sub_epi32(_mm256_set1_epi32(254 << 23), pow_bits));
  __m256 step = _mm256_mul_ps(_mm256_set1_ps(0.9f), inv_pow);
  __m256 inv_scale =
      _mm256_permutevar8x32_ps(_mm256_load_ps(kInvScaleByK), _mm256_srli_epi32(pow_bits, 23));
  __m256 lvl =
      _mm256_mul_ps(_mm256_add_ps(_mm256_set1_ps(0.1f), _mm256_mul_ps(q, step)), inv_scale);
  __m256 v = _mm256_mul_ps(lvl, amax);
  __m256 nonzero = _mm256_castsi256_ps(_mm256_cmpgt_epi32(mi, _mm256_setzero_si256()));
  __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
  return _mm256_or_ps(_mm256_and_ps(v, nonzero), _mm256_castsi256_ps(sign));
}

// Codes of 8 values s (already g + r), as int32 lanes, and their new residuals. Permutes
// are the scarce resource (one shuffle port), so the per-level constants that are powers of
// two times another constant are computed instead of looked up.
inline __m256i encode8(__m256 s, __m256 inv, __m256 amax, __m256* resid) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 a =
      _mm256_min_ps(_mm256_mul_ps(_mm256_andnot_ps(sign_mask, s), inv), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_setzero_si256();
  for (float th : kThreshold) {
    e = _mm256_sub_epi32(e, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(th), _CMP_LE_OQ)));
  }
  __m256 scale = _mm256_permutevar8x32_ps(_mm256_load_ps(kScale), e);
  __m256 cnt = _mm256_permutevar8x32_ps(_mm256_load_ps(kCount), e);
  __m256 t = _mm256_mul_ps(a, scale);
  __m256 u = _mm256_mul_ps(
      _mm256_mul_ps(_mm256_sub_ps(t, _mm256_set1_ps(0.1f)), _mm256_set1_ps(kInvStep)), cnt);
  __m256 q = _mm256_round_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm256_min_ps(_mm256_max_ps(q, _mm256_setzero_ps()), cnt);
  __m256i mi = _mm256_cvttps_epi32(_mm256_add_ps(q, _mm256_sub_ps(cnt, _mm256_set1_ps(1.0f))));
  __m256i sign = _mm256_srli_epi32(
      _mm256_and_si256(_mm256_castps_si256(s), _mm256_castps_si256(sign_mask)), 24);
  // The decoded value table[code] * absmax, computed as magnitude() does from (e, q), which
  // are at hand (cheaper here than decode8 from the code).
  __m256 step = _mm256_permutevar8x32_ps(_mm256_load_ps(kStep), e);
  __m256 inv_scale = _mm256_permutevar8x32_ps(_mm256_load_ps(kInvScale), e);
  __m256 below = _mm256_permutevar8x32_ps(_mm256_load_ps(kInvScaleBelow), e);
  __m256 lvl =
      _mm256_mul_ps(_mm256_add_ps(_mm256_set1_ps(0.1f), _mm256_mul_ps(q, step)), inv_scale);
  __m256 mag = _mm256_blendv_ps(lvl, below, _mm256_cmp_ps(q, _mm256_setzero_ps(), _CMP_EQ_OQ));
  __m256 d = _mm256_xor_ps(_mm256_mul_ps(mag, amax), _mm256_and_ps(s, sign_mask));
  *resid = _mm256_sub_ps(s, d);
  return _mm256_or_si256(mi, sign);
}

}  // namespace

bool int8_encode_avx2(const float* g, float* r, size_t n, size_t block, float* absmax,
                      uint8_t* codes) {
  const float* table = int8_dynamic_tree_table().data();
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256i bad = _mm256_setzero_si256();
  bool ok = true;
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    size_t len = std::min(n - b0, block);
    size_t vec = len & ~size_t(7);
    float* rb = r + b0;
    const float* gb = g + b0;
    __m256 vmax = _mm256_setzero_ps();
    for (size_t i = 0; i < vec; i += 8) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(gb + i), _mm256_loadu_ps(rb + i));
      __m256i e = _mm256_and_si256(_mm256_castps_si256(s), exp_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));
      _mm256_storeu_ps(rb + i, s);
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign_mask, s));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    float amax = 0.0f;
    for (float l : lanes) amax = std::max(amax, l);
    for (size_t i = vec; i < len; ++i) {  // max is exact in any order: same as the reference
      float s = gb[i] + rb[i];
      ok &= is_finite_bits(s);
      rb[i] = s;
      amax = std::max(amax, std::fabs(s));
    }
    absmax[bi] = amax;
    float inv_s = inverse(amax);
    __m256 inv = _mm256_set1_ps(inv_s), vamax = _mm256_set1_ps(amax);
    const size_t vec32 = len & ~size_t(31);
    for (size_t i = 0; i < vec32; i += 32) {
      __m256i c[4];
      for (int k = 0; k < 4; ++k) {
        __m256 resid;
        c[k] = encode8(_mm256_loadu_ps(rb + i + 8 * k), inv, vamax, &resid);
        _mm256_storeu_ps(rb + i + 8 * k, resid);
      }
      // 32 int32 codes (each < 256) -> 32 bytes; the packs interleave 128-bit lanes.
      __m256i p =
          _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
      p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + b0 + i), p);
    }
    for (size_t i = vec32; i < len; ++i) {
      uint8_t c = encode_one_ref(rb[i], inv_s);
      codes[b0 + i] = c;
      rb[i] = rb[i] - table[c] * amax;
    }
  }
  return ok && _mm256_testz_si256(bad, bad);
}

void int8_decode_avx2(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                      DecodeMode mode) {
  const float* table = int8_dynamic_tree_table().data();
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    size_t len = std::min(n - b0, block);
    size_t vec = len & ~size_t(7);
    __m256 amax = _mm256_set1_ps(absmax[bi]);
    for (size_t i = 0; i < vec; i += 8) {
      __m256i c =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + b0 + i)));
      __m256 v = decode8(c, amax);
      if (mode == DecodeMode::kAccumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + b0 + i), v);
      _mm256_storeu_ps(out + b0 + i, v);
    }
    for (size_t i = vec; i < len; ++i) {
      float v = table[codes[b0 + i]] * absmax[bi];
      out[b0 + i] = mode == DecodeMode::kWrite ? v : out[b0 + i] + v;
    }
  }
}

namespace {

// GCC 12's AVX-512 intrinsics (_mm512_max_epu32, _mm512_permutexvar_epi8, ...) pass
// _mm512_undefined_epi32() as the unused merge source, which -Wmaybe-uninitialized reports; nothing
// uninitialised is read.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// AVX-512 VBMI decode, 64 codes a step: vpermi2b looks up 64 bytes at once in a 128-entry byte
// table, so the 128 magnitudes table[0..127] are split into 4 byte planes (byte k of each
// float), looked up once each, and interleaved back into floats; the code's sign bit goes
// straight into the top byte (table[c | 0x80] = -table[c], bit for bit, 0x80 is -0). Then
// * absmax as the reference does. The unpacks interleave within 128-bit lanes, so the codes
// are first permuted so that the 4 outputs come out in element order.
struct VbmiPlanes {
  alignas(64) uint8_t plane[4][128];
  alignas(64) uint8_t perm[64];
};

const VbmiPlanes& vbmi_planes() {
  static const VbmiPlanes p = [] {
    VbmiPlanes v{};
    const auto& t = int8_dynamic_tree_table();
    for (int j = 0; j < 128; ++j) {
      uint32_t bits = std::bit_cast<uint32_t>(t[j]);
      for (int k = 0; k < 4; ++k) v.plane[k][j] = uint8_t(bits >> (8 * k));
    }
    // After the unpacks, output vector k, 128-bit lane L, float m holds input byte
    // 16 L + 4 k + m; it must be element 16 k + 4 L + m.
    for (int L = 0; L < 4; ++L)
      for (int k = 0; k < 4; ++k)
        for (int m = 0; m < 4; ++m) v.perm[16 * L + 4 * k + m] = uint8_t(16 * k + 4 * L + m);
    return v;
  }();
  return p;
}

// The AVX-512 kernels' target (int8_have_avx512_vbmi() says whether the CPU runs it; the
// encoder adds DQ).
#define LOOM_INT8_VBMI_TARGET "avx512f,avx512bw,avx512vbmi"
#define LOOM_VBMI __attribute__((target(LOOM_INT8_VBMI_TARGET), always_inline)) inline

// table[code] for 64 codes at once, the bits of each float looked up byte by byte in the four
// 128-entry planes; shared by the decoder and the encoder's residual, so both compute the
// decoded value the same way.
struct VbmiTableLookup {
  __m512i lo[4], hi[4], perm, sign;
  LOOM_VBMI VbmiTableLookup() {
    const VbmiPlanes& vp = vbmi_planes();
    for (int k = 0; k < 4; ++k) {
      lo[k] = _mm512_load_si512(vp.plane[k]);
      hi[k] = _mm512_load_si512(vp.plane[k] + 64);
    }
    perm = _mm512_load_si512(vp.perm);
    sign = _mm512_set1_epi8(char(0x80));
  }
  // w[k] = the bits of table[codes[16 k .. 16 k + 15]] (absmax = 1), in code order.
  LOOM_VBMI void bits(__m512i codes, __m512i w[4]) const {
    const __m512i c = _mm512_permutexvar_epi8(perm, codes);
    const __m512i p0 = _mm512_permutex2var_epi8(lo[0], c, hi[0]);
    const __m512i p1 = _mm512_permutex2var_epi8(lo[1], c, hi[1]);
    const __m512i p2 = _mm512_permutex2var_epi8(lo[2], c, hi[2]);
    const __m512i p3 =
        _mm512_or_si512(_mm512_permutex2var_epi8(lo[3], c, hi[3]), _mm512_and_si512(c, sign));
    const __m512i l01 = _mm512_unpacklo_epi8(p0, p1), h01 = _mm512_unpackhi_epi8(p0, p1);
    const __m512i l23 = _mm512_unpacklo_epi8(p2, p3), h23 = _mm512_unpackhi_epi8(p2, p3);
    w[0] = _mm512_unpacklo_epi16(l01, l23);
    w[1] = _mm512_unpackhi_epi16(l01, l23);
    w[2] = _mm512_unpacklo_epi16(h01, h23);
    w[3] = _mm512_unpackhi_epi16(h01, h23);
  }
};

__attribute__((target(LOOM_INT8_VBMI_TARGET))) void int8_decode_vbmi(const float* absmax,
                                                                     const uint8_t* codes, size_t n,
                                                                     size_t block, float* out,
                                                                     DecodeMode mode) {
  const VbmiTableLookup lookup;
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    const size_t len = std::min(n - b0, block);
    const size_t vec = len & ~size_t(63);
    const __m512 amax = _mm512_set1_ps(absmax[bi]);
    for (size_t i = 0; i < vec; i += 64) {
      __m512i w[4];
      lookup.bits(_mm512_loadu_si512(reinterpret_cast<const void*>(codes + b0 + i)), w);
      float* o = out + b0 + i;
      for (int k = 0; k < 4; ++k) {
        __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(w[k]), amax);
        if (mode == DecodeMode::kAccumulate) v = _mm512_add_ps(_mm512_loadu_ps(o + 16 * k), v);
        _mm512_storeu_ps(o + 16 * k, v);
      }
    }
    if (vec < len) {  // the block's last < 64 codes (only a short last block or block < 64)
      int8_decode_avx2(absmax + bi, codes + b0 + vec, len - vec, len - vec, out + b0 + vec, mode);
    }
  }
}

}  // namespace

bool int8_have_avx512_vbmi() {
  return cpu_has_avx512_vbmi() && cpu_has_avx512();
}

namespace {

// AVX-512 encode (F and DQ for the arithmetic, VBMI for the residual), three passes over a block
// while it sits in L1 (2 KB of g, 2 KB of r at B = 512):
//  1. s = g + r, stored into r; the block maximum as the unsigned maximum of |s|'s bits, which
//     is the float maximum for finite values and >= 0x7f800000 exactly when some s is NaN/Inf
//     (one integer max per 16 values instead of a max, a compare and an or; vrangeps, one
//     operation instead of two, passes over a quiet NaN).
//  2. The codes, in the reference's float operations (so bit for bit), minus its work that is
//     provably idle on finite input (the min(a, 1) and the q clamps: u lies in [-1/9, m_e] to
//     within rounding, so round(u) is already in [0, m_e]) and with the level found from the
//     float's exponent: a binade [2^k, 2^(k+1)) holds at most one decade threshold (they are
//     10x apart), so one 32-entry vpermi2d lookup by the binade and one integer add give k =
//     6 - e (Avx512Levels::p) instead of six compares and six adds.
//  3. r = s - table[code] * absmax with the VBMI decoder's byte-table lookups (64 codes a
//     step): the decoded value bit for bit the decoder's, and much cheaper than rebuilding it
//     from (e, q) with five per-level constants.
// Step 1 of block b + 1 runs inside block b's level loop (step 2's first half), for arrays up
// to kOverlapMaxValues. That loop is held up by its chain's latency, not by the pipes, and
// step 1 is loads, a store and cheap integer work that fills the gaps; it also overlaps step
// 1's L3 misses with step 2's arithmetic. Prefetching helps only larger arrays
// (kPrefetchMinValues).
// What bounds it (Zen 5): about four vector operations a cycle in all, vector loads and stores
// counted among them (mul on two pipes; add, shift and convert on two others; permutes, vpmovdb
// and vpermt2b on two of the four; integer add/and/max/blend and unpacks on any), and one 64-byte
// store a cycle. The kernel issues ~38 such operations per 16 values (step 1: 6, levels: 8,
// codes: 16, step 3: ~7.75). Fewer operations help only where the chains stay short: hence the
// level lookup above (one permute and an add instead of two permutes, a compare and a masked
// add), one product by kInvStep * m_e instead of a product and an exponent add, and vrangeps for
// the level pass's and + max; variants that save operations by lengthening a chain are slower
// (docs/compress.md, "Figures behind the kernels' choices", lists them with the measurements).
struct Avx512Levels {
  // Indexed by the biased exponent of a mod 32; a is clamped to >= 2^-31 (biased 96), and
  // a <= 1 + 2 ulp (biased <= 127), so 96..127 are distinct. (Inf, biased 255, aliases 127.)
  // X = bits(a) + p[b] has k = 6 - e in bits 23..30 (m_e = 2^k): the high part of p[b] moves
  // the binade's exponent to k for the level below its threshold, and the low part,
  // 0x7fffff - mantissa(threshold), carries into bit 23 (one level up) exactly when
  // a > threshold; a binade with no threshold carries always (low part 2^23).
  alignas(64) int32_t p[32];
  alignas(64) float scale[16];     // 10^e by k
  alignas(64) float inv_step[16];  // kInvStep * m_e by k
  alignas(64) int32_t cm1[16];     // m_e - 1 by k
};

// Below this a is clamped for the exponent lookup; such values are code 0 either way (e = 6,
// u = (a * 1e6 - 0.1) / 0.9 rounds to 0 for any a < 0.55e-6).
constexpr float kMinA = 0x1p-31f;

const Avx512Levels& avx512_levels() {
  static const Avx512Levels L = [] {
    Avx512Levels v{};
    for (int b = 96; b < 128; ++b) {
      const float lo = std::ldexp(1.0f, b - 127), hi = std::ldexp(1.0f, b - 126);
      int e_hi = 0;  // the level of the binade's values above its threshold
      uint32_t low = 1u << 23;
      for (float t : kThreshold) {
        if (t >= hi) ++e_hi;
        if (t >= lo && t < hi) low = 0x7fffffu - (std::bit_cast<uint32_t>(t) & 0x7fffffu);
      }
      // k = (5 - e_hi) + carry.
      v.p[b & 31] = int32_t(uint32_t(5 - e_hi - b) * (1u << 23) + low);
    }
    for (int k = 0; k < 16; ++k) {
      v.scale[k] = kScale[k <= 6 ? 6 - k : 7];
      v.inv_step[k] = std::ldexp(kInvStep, k <= 6 ? k : 0);
      v.cm1[k] = k <= 6 ? (1 << k) - 1 : 0;
    }
    return v;
  }();
  return L;
}

// vrangeps: the operand of larger magnitude, sign bit cleared (a quiet NaN loses to a number).
constexpr int kRangeAbsMax = 0b1011;

#define LOOM_AVX512_ENCODE __attribute__((target(LOOM_INT8_VBMI_TARGET ",avx512dq")))

// The codes in two halves, each a pass over up to kChunk values: level16() finds a (clamped)
// and X (k), code16() the rest. One chain per 16 values is ~45 cycles of latency, more than
// the scheduler can cover, so the split (through 2 KB of L1 scratch) lets each half run at the
// pipes' rate.
constexpr size_t kChunk = 256;
// How step 1 is scheduled depends on where g and r come from, which the array size tells
// roughly (the thresholds suit 1 MB of L2 per core and a 32 MB L3 shared with other tenants;
// docs/compress.md has the measurements by size): up to kPrefetchMinValues overlapped, up to
// kOverlapMaxValues overlapped with software prefetch kPrefetchAhead values (at least two
// blocks) ahead, beyond that step 1 on its own as one dense stream, which keeps more misses in
// flight. The training loop's buckets (sync.bucket_kib, 4 MB by default) take the first.
constexpr size_t kPrefetchMinValues = size_t(1) << 20;
constexpr size_t kOverlapMaxValues = size_t(4) << 20;
constexpr size_t kPrefetchAhead = 2048;

// a = max(|s| * inv, kMinA) and X (Avx512Levels::p: k = 6 - e in bits 23..30).
LOOM_AVX512_ENCODE inline void level16(__m512 s, __m512 inv, const __m512i& p0, const __m512i& p1,
                                       __m512* a_out, __m512i* x_out) {
  // |s| * inv == |s * inv| (inv >= 0), clamped below: vrangeps's larger magnitude, sign cleared.
  const __m512i ab = _mm512_castps_si512(
      _mm512_range_ps(_mm512_mul_ps(s, inv), _mm512_set1_ps(kMinA), kRangeAbsMax));
  *x_out = _mm512_add_epi32(ab, _mm512_permutex2var_epi32(p0, _mm512_srli_epi32(ab, 23), p1));
  *a_out = _mm512_castsi512_ps(ab);
}

// 16 codes (int32 lanes, the byte in bits 0..7) from s, a and X.
LOOM_AVX512_ENCODE inline __m512i code16(__m512 s, __m512 a, __m512i x, const __m512& scale,
                                         const __m512& inv_step, const __m512i& cm1) {
  const __m512i k = _mm512_srli_epi32(x, 23);
  __m512 t = _mm512_mul_ps(a, _mm512_permutexvar_ps(k, scale));
  // ((t - 0.1) * kInvStep) * m_e as one product with kInvStep * m_e: scaling by a power of two
  // commutes with rounding (the value is 0 or at least ~1e-9 in magnitude, never subnormal).
  __m512 u =
      _mm512_mul_ps(_mm512_sub_ps(t, _mm512_set1_ps(0.1f)), _mm512_permutexvar_ps(k, inv_step));
  // cvtps2dq rounds to nearest even (MXCSR default), as nearbyint in the reference.
  __m512i mi = _mm512_add_epi32(_mm512_cvtps_epi32(u), _mm512_permutexvar_epi32(k, cm1));
  // (mi & 0x7f) | (sign << 7): a bitwise select on (s >> 24).
  return _mm512_ternarylogic_epi32(mi, _mm512_srli_epi32(_mm512_castps_si512(s), 24),
                                   _mm512_set1_epi32(0x7f), 0xE4);
}

// s = g + r into r for 16 values, the maximum of |s|'s bits folded into vmax (step 1).
LOOM_AVX512_ENCODE inline void sum16(const float* g, float* r, __m512i& vmax) {
  const __m512 s = _mm512_add_ps(_mm512_loadu_ps(g), _mm512_loadu_ps(r));
  _mm512_storeu_ps(r, s);
  vmax = _mm512_max_epu32(vmax,
                          _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(0x7fffffff)));
}

// Step 1 for values i .. len - 1 of a block (the scalar tail included): the maximum of |s|'s
// bits over the whole block, given vmax for the values before i.
LOOM_AVX512_ENCODE inline uint32_t sum_tail(const float* g, float* r, size_t i, size_t len,
                                            __m512i vmax) {
  __m512i vmax1 = _mm512_setzero_si512();
  for (; i + 32 <= len; i += 32) {
    sum16(g + i, r + i, vmax);
    sum16(g + i + 16, r + i + 16, vmax1);
  }
  for (; i + 16 <= len; i += 16) sum16(g + i, r + i, vmax);
  uint32_t max_bits = _mm512_reduce_max_epu32(_mm512_max_epu32(vmax, vmax1));
  for (; i < len; ++i) {
    const float s = g[i] + r[i];
    r[i] = s;
    max_bits = std::max(max_bits, std::bit_cast<uint32_t>(s) & 0x7fffffffu);
  }
  return max_bits;
}

template <bool kOverlap, bool kPrefetch>
LOOM_AVX512_ENCODE bool int8_encode_avx512(const float* g, float* r, size_t n, size_t block,
                                           float* absmax, uint8_t* codes) {
  const float* table = int8_dynamic_tree_table().data();
  const Avx512Levels& L = avx512_levels();
  const __m512i p0 = _mm512_load_si512(L.p), p1 = _mm512_load_si512(L.p + 16);
  const __m512 scale = _mm512_load_ps(L.scale), inv_step = _mm512_load_ps(L.inv_step);
  const __m512i cm1 = _mm512_load_si512(L.cm1);
  const VbmiTableLookup lookup;
  alignas(64) float a_tmp[kChunk];
  alignas(64) int32_t x_tmp[kChunk];
  if (n == 0) return true;
  // Step 1 of block 0 on its own; that of block b + 1 inside block b's level loop (kOverlap)
  // or at the start of block b + 1. The code loop prefetches g and r `ahead` values on
  // (kPrefetch), for a step 1 a few blocks later.
  const size_t ahead = std::max(kPrefetchAhead, 2 * block);
  uint32_t max_bits = sum_tail(g, r, 0, std::min(n, block), _mm512_setzero_si512());
  uint32_t max_bits_all = 0;
  for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    const size_t len = std::min(n - b0, block);
    const size_t vec = len & ~size_t(15), vec64 = len & ~size_t(63);
    float* rb = r + b0;
    const float* gb = g + b0;
    uint8_t* cb = codes + b0;
    // The next block (len_next = 0 after the last one); only the last block is shorter.
    const size_t len_next = b0 + len < n ? std::min(n - b0 - len, block) : 0;
    if (!kOverlap && b0 > 0) max_bits = sum_tail(gb, rb, 0, len, _mm512_setzero_si512());
    const size_t vec_next = kOverlap ? len_next & ~size_t(15) : 0;
    float* rn = rb + len;
    const float* gn = gb + len;
    __m512i vmax_next = _mm512_setzero_si512();
    const size_t pf_end = n - b0 > ahead ? std::min(vec, n - b0 - ahead) : 0;
    max_bits_all = std::max(max_bits_all, max_bits);
    const float amax = std::bit_cast<float>(max_bits);  // the float maximum when all finite
    absmax[bi] = amax;
    const float inv_s = inverse(amax);
    const __m512 inv = _mm512_set1_ps(inv_s), vamax = _mm512_set1_ps(amax);
    // 2. Codes, in chunks of kChunk: levels into L1 scratch, with the next block's step 1
    // beside them, then the codes.
    size_t i;
    for (size_t c0 = 0; c0 < vec; c0 += kChunk) {
      const size_t c1 = std::min(vec, c0 + kChunk);
      auto level = [&](size_t j) LOOM_AVX512_ENCODE {
        __m512 a;
        __m512i x;
        level16(_mm512_loadu_ps(rb + j), inv, p0, p1, &a, &x);
        _mm512_store_ps(a_tmp + (j - c0), a);
        _mm512_store_si512(x_tmp + (j - c0), x);
      };
      const size_t both = std::clamp(vec_next, c0, c1);
      for (i = c0; i < both; i += 16) {
        sum16(gn + i, rn + i, vmax_next);
        level(i);
      }
      for (; i < c1; i += 16) level(i);
      for (i = c0; i < c1; i += 16) {
        if (kPrefetch && i < pf_end) {  // one line of g and one of r per 16 values
          _mm_prefetch(reinterpret_cast<const char*>(gb + ahead + i), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(rb + ahead + i), _MM_HINT_T0);
        }
        __m512i c = code16(_mm512_loadu_ps(rb + i), _mm512_load_ps(a_tmp + (i - c0)),
                           _mm512_load_si512(x_tmp + (i - c0)), scale, inv_step, cm1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(cb + i), _mm512_cvtepi32_epi8(c));
      }
    }
    // The rest of the next block's step 1: its scalar tail (all of it if this block had no
    // full vector, which the dispatch's block >= 64 rules out before the last block).
    if (kOverlap && len_next > 0) {
      max_bits = sum_tail(gn, rn, std::min(vec, vec_next), len_next, vmax_next);
    }
    for (i = vec; i < len; ++i) cb[i] = encode_one_ref(rb[i], inv_s);
    // 3. r = s - table[code] * absmax, as int8_decode_vbmi computes table[code].
    for (i = 0; i < vec64; i += 64) {
      __m512i w[4];
      lookup.bits(_mm512_loadu_si512(reinterpret_cast<const void*>(cb + i)), w);
      for (int j = 0; j < 4; ++j) {
        float* o = rb + i + 16 * j;
        __m512 d = _mm512_mul_ps(_mm512_castsi512_ps(w[j]), vamax);
        _mm512_storeu_ps(o, _mm512_sub_ps(_mm512_loadu_ps(o), d));
      }
    }
    for (; i < len; ++i) rb[i] = rb[i] - table[cb[i]] * amax;
  }
  return max_bits_all < 0x7f800000u;
}

#pragma GCC diagnostic pop

}  // namespace

bool int8_encode(const float* g, float* r, size_t n, size_t block, float* absmax, uint8_t* codes) {
  if (block >= 64 && int8_have_avx512_vbmi()) {
    // Separate instantiations: with run-time switches the compiler's code for the separate
    // step 1 is slower.
    if (n <= kPrefetchMinValues)
      return int8_encode_avx512<true, false>(g, r, n, block, absmax, codes);
    if (n <= kOverlapMaxValues)
      return int8_encode_avx512<true, true>(g, r, n, block, absmax, codes);
    return int8_encode_avx512<false, false>(g, r, n, block, absmax, codes);
  }
  return int8_encode_avx2(g, r, n, block, absmax, codes);
}

void int8_decode(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                 DecodeMode mode) {
  if (block >= 64 && int8_have_avx512_vbmi()) {
    int8_decode_vbmi(absmax, codes, n, block, out, mode);
  } else {
    int8_decode_avx2(absmax, codes, n, block, out, mode);
  }
}
#else
bool int8_have_avx512_vbmi() {
  return false;
}
bool int8_encode(const float* g, float* r, size_t n, size_t block, float* absmax, uint8_t* codes) {
  return int8_encode_ref(g, r, n, block, absmax, codes);
}
bool int8_encode_avx2(const float* g, float* r, size_t n, size_t block, float* absmax,
                      uint8_t* codes) {
  return int8_encode_ref(g, r, n, block, absmax, codes);
}
void int8_decode_avx2(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                      DecodeMode mode) {
  int8_decode_ref(absmax, codes, n, block, out, mode);
}
void int8_decode(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                 DecodeMode mode) {
  int8_decode_ref(absmax, codes, n, block, out, mode);
}
#endif

Int8Codec::Int8Codec(size_t block) : block_(block) {
  LOOM_CHECK(block >= 8 && std::has_single_bit(block), "int8 block {} is not a power of two >= 8",
             block);
}

size_t Int8Codec::encoded_bytes(size_t n) const {
  size_t blocks = (n + block_ - 1) / block_;
  return round_up4(blocks * sizeof(float) + n);
}

bool Int8Codec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  size_t blocks = (n + block_ - 1) / block_;
  auto* absmax = reinterpret_cast<float*>(out);
  auto* codes = reinterpret_cast<uint8_t*>(out + blocks * sizeof(float));
  std::memset(codes + n, 0, encoded_bytes(n) - blocks * sizeof(float) - n);
  return int8_encode(grad, state.residual.data(), n, block_, absmax, codes);
}

void Int8Codec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  size_t blocks = (n + block_ - 1) / block_;
  int8_decode(reinterpret_cast<const float*>(in),
              reinterpret_cast<const uint8_t*>(in + blocks * sizeof(float)), n, block_, out, mode);
}

// What int8_encode writes: each block's absmax is a maximum of magnitudes (finite, >= 0) and
// the padding after the codes is zero. Every code byte decodes to a table entry in [-1, 1].
void Int8Codec::check_payload_impl(const std::byte* in, size_t n, const std::string& what) const {
  const size_t blocks = (n + block_ - 1) / block_;
  const auto* absmax = reinterpret_cast<const float*>(in);
  for (size_t b = 0; b < blocks; ++b) {
    if (!(std::isfinite(absmax[b]) && absmax[b] >= 0.0f))
      payload_error(what, name(), n,
                    fmt::format("block {} has absmax {} (a maximum of magnitudes)", b, absmax[b]));
  }
  if (!zero_bytes(in, blocks * sizeof(float) + n, encoded_bytes(n)))
    payload_error(what, name(), n, "the padding after the codes is not zero");
}

}  // namespace loom::compress
