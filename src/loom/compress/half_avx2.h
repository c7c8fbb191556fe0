// The AVX2 encoders' residual access, 8 values at a time, for either ResidualFormat: float
// (exact) or bfloat16 bits rounded as residual_to_bf16_ref (clamp, then nearest even). Included
// by the fp16 and bf16 codecs' AVX2 kernels, which are overloaded on the residual's type.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>

#include "loom/compress/half.h"

namespace loom::compress::half_avx2 {

inline __m256 load_residual8(const float* r) {
  return _mm256_loadu_ps(r);
}

inline __m256 load_residual8(const uint16_t* r) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
}

inline void store_residual8(float* r, __m256 v) {
  _mm256_storeu_ps(r, v);
}

inline void store_residual8(uint16_t* r, __m256 v) {
  const __m256 c =
      _mm256_min_ps(_mm256_set1_ps(kBf16Max), _mm256_max_ps(_mm256_set1_ps(-kBf16Max), v));
  __m256i x = _mm256_castps_si256(c);
  // a denormal (exponent 0) becomes a zero of its sign
  const __m256i exp = _mm256_and_si256(x, _mm256_set1_epi32(0x7f800000));
  const __m256i denormal = _mm256_cmpeq_epi32(exp, _mm256_setzero_si256());
  x = _mm256_blendv_epi8(x, _mm256_and_si256(x, _mm256_set1_epi32(int32_t(0x80000000u))), denormal);
  x = _mm256_add_epi32(
      x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                          _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))));
  x = _mm256_srli_epi32(x, 16);  // 0 .. 0xffff: packus keeps them as they are
  const __m128i b = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(r), b);
}

}  // namespace loom::compress::half_avx2
#endif
