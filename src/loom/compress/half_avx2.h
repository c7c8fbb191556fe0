// The AVX2 encoders' residual access, 8 values at a time, for either ResidualFormat: float
// (exact) or bfloat16 bits rounded as residual_to_bf16_ref. Included by the fp16 and bf16
// codecs' AVX2 kernels, which are overloaded on the residual's type.
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

// v must be finite and within +-kBf16Max (the encoders' loops see only such residuals; the rest
// go through the reference): nearest even, as residual_to_bf16_ref.
inline void store_residual8(uint16_t* r, __m256 v) {
  __m256i x = _mm256_castps_si256(v);
  x = _mm256_add_epi32(
      x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                          _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))));
  x = _mm256_srli_epi32(x, 16);  // 0 .. 0xffff: packus keeps them as they are
  const __m128i b = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(r), b);
}

}  // namespace loom::compress::half_avx2
#endif
