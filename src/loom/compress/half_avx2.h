// AVX2 loops shared by the 16-bit codecs (half_codec.h; included by half_codec_impl.h only):
// the residual's access 16 values at a time, for either ResidualFormat (float, exact, or
// bfloat16 bits rounded as residual_to_bf16_ref), and the encode and decode loops over a
// format's kernels.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "loom/compress/codec.h"
#include "loom/compress/half.h"

#define LOOM_HALF_AVX2_INLINE __attribute__((always_inline)) inline

namespace loom::compress::half_avx2 {

// 16 residuals as two vectors of 8 floats (elements 0-7, 8-15).
inline void load_residual16(const float* r, __m256* v0, __m256* v1) {
  *v0 = _mm256_loadu_ps(r);
  *v1 = _mm256_loadu_ps(r + 8);
}

// One 32-byte load; the quadwords reordered (0 2 1 3) so that each 128-bit lane's low half
// holds elements 0-7 and its high half 8-15, which the unpacks put in the upper halves of the
// 32-bit lanes (zeros below): 4 operations per 16 instead of 6 for two 8-wide widenings.
inline void load_residual16(const uint16_t* r, __m256* v0, __m256* v1) {
  const __m256i b =
      _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r)), 0xd8);
  const __m256i zero = _mm256_setzero_si256();
  *v0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, b));
  *v1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, b));
}

inline void store_residual16(float* r, __m256 v0, __m256 v1) {
  _mm256_storeu_ps(r, v0);
  _mm256_storeu_ps(r + 8, v1);
}

// Nearest even as residual_to_bf16_ref, the bfloat16 in the lower half of each 32-bit lane.
inline __m256i bf16_round8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)),
                           16);
}

// v0, v1 must be finite and within +-kBf16Max (the encoders' loops see only such residuals; the
// rest go through the reference). packus keeps 0 .. 0xffff as they are but interleaves the
// 128-bit lanes; the permute puts elements 0-15 back in order.
inline void store_residual16(uint16_t* r, __m256 v0, __m256 v1) {
  const __m256i b = _mm256_packus_epi32(bf16_round8(v0), bf16_round8(v1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(r), _mm256_permute4x64_epi64(b, 0xd8));
}

// A format's AVX2 kernels P (Format::Avx2) provide:
//   static bool codes16(__m256 s0, __m256 s1, __m256i* codes, __m256* d0, __m256* d1)
//       the 16 codes of s0, s1 in order and their decoded values; false if the reference must
//       encode these 16 (a NaN, an Inf or a magnitude past the clamp), and then the outputs
//       are unused
//   static __m256 decode8(__m128i codes)  8 codes to floats
//
// The encode loop: 16 values a step. A step codes16 refuses, and the tail, go through ref (the
// format's scalar reference for this residual type, a function object as in half_avx512.h),
// which defines the bits: so the loop needs no clamp and matches the reference on every input.
// Returns false if any g + r is NaN or Inf.
template <class P, class R, class Ref>
bool encode(const float* g, R* r, size_t n, uint16_t* out, Ref ref) {
  bool ok = true;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 r0, r1;
    load_residual16(r + i, &r0, &r1);
    const __m256 s0 = _mm256_add_ps(_mm256_loadu_ps(g + i), r0);
    const __m256 s1 = _mm256_add_ps(_mm256_loadu_ps(g + i + 8), r1);
    __m256i codes;
    __m256 d0, d1;
    if (__builtin_expect(!P::codes16(s0, s1, &codes, &d0, &d1), 0)) {
      ok &= ref(g + i, r + i, 16, out + i);  // r + i is as it was: only loaded so far
      continue;
    }
    store_residual16(r + i, _mm256_sub_ps(s0, d0), _mm256_sub_ps(s1, d1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), codes);
  }
  return ref(g + i, r + i, n - i, out + i) && ok;
}

// Decode: 8 codes a step by P::decode8, written or added; the last n % 8 are left.
template <class P, bool kAccumulate>
void decode(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    __m256 v = P::decode8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if constexpr (kAccumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
}

// The decoders' entry point: the vector loop, then the last n % 8 codes by ref.
template <class P, class Ref>
void decode_any(const uint16_t* in, size_t n, float* out, DecodeMode mode, Ref ref) {
  if (mode == DecodeMode::kAccumulate) {
    decode<P, true>(in, n, out);
  } else {
    decode<P, false>(in, n, out);
  }
  const size_t done = n & ~size_t(7);
  ref(in + done, n - done, out + done, mode);
}

}  // namespace loom::compress::half_avx2
#endif
