#include "loom/compress/bf16_codec.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "loom/compress/half_avx2.h"
#include "loom/compress/half_avx512.h"
#define LOOM_COMPRESS_AVX2 1
#endif

namespace loom::compress {

namespace {

template <class R>
bool encode_ref(const float* g, R* r, size_t n, Bf16* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + load_residual(r, i);
    ok &= is_finite_bits(s);
    Bf16 b = float_to_bf16_ref(std::min(std::max(s, -kBf16Max), kBf16Max));
    out[i] = b;
    store_residual(r, i, s - bf16_to_float_ref(b));
  }
  return ok;
}

}  // namespace

bool bf16_encode_ref(const float* g, float* r, size_t n, Bf16* out) {
  return encode_ref(g, r, n, out);
}

bool bf16_encode_ref(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return encode_ref(g, r, n, out);
}

void bf16_decode_ref(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  if (mode == DecodeMode::kWrite) {
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float_ref(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += bf16_to_float_ref(in[i]);
  }
}

#if LOOM_COMPRESS_AVX2
namespace {

// 16 values a step. |s| >= 0x7f7f8000 (a NaN, an Inf, or a value that rounds past the largest
// finite bfloat16, where the reference clamps) sends the step to the reference, so the loop
// needs no clamp and matches the reference on every input.
template <class R>
bool bf16_encode_vec(const float* g, R* r, size_t n, Bf16* out) {
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i top = _mm256_set1_epi32(int32_t(0xffff0000u));
  const __m256i abs = _mm256_set1_epi32(0x7fffffff), below = _mm256_set1_epi32(0x7f7f7fff);
  bool ok = true;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 s[2];
    half_avx2::load_residual16(r + i, &s[0], &s[1]);
    __m256i big = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      s[h] = _mm256_add_ps(_mm256_loadu_ps(g + i + 8 * h), s[h]);
      // both sides non-negative as int32, so the signed compare is the unsigned one
      big = _mm256_or_si256(
          big, _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(s[h]), abs), below));
    }
    if (__builtin_expect(!_mm256_testz_si256(big, big), 0)) {
      ok &= bf16_encode_ref(g + i, r + i, 16, out + i);
      continue;
    }
    __m256i q[2];
    __m256 e[2];
    for (int h = 0; h < 2; ++h) {
      // round to nearest even: x += 0x7fff + bit 16 of x
      __m256i x = _mm256_castps_si256(s[h]);
      x = _mm256_add_epi32(
          x, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(x, 16), one)));
      x = _mm256_and_si256(x, top);
      e[h] = _mm256_sub_ps(s[h], _mm256_castsi256_ps(x));
      q[h] = _mm256_srli_epi32(x, 16);
    }
    half_avx2::store_residual16(r + i, e[0], e[1]);
    // packus interleaves 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7]; permute back to a0-7 b0-7.
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(q[0], q[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p);
  }
  return bf16_encode_ref(g + i, r + i, n - i, out + i) && ok;
}

#pragma GCC diagnostic push  // see half_avx512.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// AVX-512: vcvtne2ps2bf16, which rounds as the reference for every finite float but the
// denormals (it reads them as zero). The 32 values go to the reference when some |s| is
// >= 0x7f7f8000 (a NaN, an Inf, or a value that rounds past the largest finite bfloat16, where
// the reference clamps) or nonzero below 2^-103: then s is a denormal, or its residual (a
// multiple of 2^(E-23) for |s| in [2^E, 2^(E+1))) may be one, which the bf16 residual's
// vcvtne2ps2bf16 would flush. Otherwise the unclamped rounding gives the clamped value's code.
// One instruction per 32 codes is faster than the integer rounding (docs/compress.md).
struct Bf16Avx512 {
  LOOM_HALF_AVX512_INLINE static __mmask16 odd16(__m512 s) {
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 big = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7f7f8000));
    const __mmask16 small = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(a, a), a,
                                                         _mm512_set1_epi32(0x0c000000));
    return big | small;
  }
  LOOM_HALF_AVX512_ENCODE_INLINE static bool codes32(__m512 s0, __m512 s1, __m512i* codes,
                                                     __m512* d0, __m512* d1) {
    if ((odd16(s0) | odd16(s1)) != 0) return false;
    *codes = (__m512i)_mm512_cvtne2ps_pbh(s1, s0);
    half_avx512::widen_bf16x32(*codes, d0, d1);
    return true;
  }
  LOOM_HALF_AVX512_INLINE static __m512 decode16(__m256i b) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
};

// Without AVX512_BF16: the codes rounded in integer operations (which the reference's rounding
// is), under the same conditions.
struct Bf16Avx512Int {
  LOOM_HALF_AVX512_INLINE static bool codes32(__m512 s0, __m512 s1, __m512i* codes, __m512* d0,
                                              __m512* d1) {
    if ((Bf16Avx512::odd16(s0) | Bf16Avx512::odd16(s1)) != 0) return false;
    const __m512i top = _mm512_set1_epi32(int32_t(0xffff0000u));
    const __m512i x0 = half_avx512::bf16_round_upper(s0), x1 = half_avx512::bf16_round_upper(s1);
    *codes = half_avx512::upper_halves(x0, x1);
    *d0 = _mm512_castsi512_ps(_mm512_and_si512(x0, top));
    *d1 = _mm512_castsi512_ps(_mm512_and_si512(x1, top));
    return true;
  }
};

#pragma GCC diagnostic pop

}  // namespace

bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_vec(g, r, n, out);
}

bool bf16_encode_avx2(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_vec(g, r, n, out);
}

namespace {

template <class T>
bool bf16_encode_dispatch(const float* g, T* r, size_t n, Bf16* out, bool bf16_isa) {
  if (!cpu_has_avx512()) return bf16_encode_vec(g, r, n, out);
  return half_avx512::encode_avx512<Bf16Avx512, Bf16Avx512Int>(g, r, n, out, encode_ref, bf16_isa);
}

}  // namespace

bool bf16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_dispatch(g, r, n, out, false);
}

bool bf16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_dispatch(g, r, n, out, false);
}

bool bf16_encode(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_dispatch(g, r, n, out, true);
}

bool bf16_encode(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_dispatch(g, r, n, out, true);
}

void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
    if (mode == DecodeMode::kAccumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  bf16_decode_ref(in + i, n - i, out + i, mode);
}

void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  if (cpu_has_avx512()) {
    half_avx512::decode_any<Bf16Avx512>(in, n, out, mode == DecodeMode::kAccumulate);
  } else {
    bf16_decode_avx2(in, n, out, mode);
  }
}
#else
bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
bool bf16_encode_avx2(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  bf16_decode_ref(in, n, out, mode);
}
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
bool bf16_encode(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
bool bf16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
bool bf16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  bf16_decode_ref(in, n, out, mode);
}
#endif

bool Bf16Codec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  std::memset(out + n * sizeof(Bf16), 0, encoded_bytes(n) - n * sizeof(Bf16));
  Bf16* codes = reinterpret_cast<Bf16*>(out);
  if (state.residual_format == ResidualFormat::kBf16)
    return bf16_encode(grad, state.residual_bf16.data(), n, codes);
  return bf16_encode(grad, state.residual.data(), n, codes);
}

void Bf16Codec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  bf16_decode(reinterpret_cast<const Bf16*>(in), n, out, mode);
}

}  // namespace loom::compress
