// The AVX2 encoders' residual access, 16 values at a time, for either ResidualFormat: float
// (exact) or bfloat16 bits rounded as residual_to_bf16_ref. Included by the fp16 and bf16
// codecs' AVX2 kernels, which are overloaded on the residual's type.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>

#include "loom/compress/half.h"

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

}  // namespace loom::compress::half_avx2
#endif
