#include "loom/compress/fp16_codec.h"

#include "loom/compress/half_codec_impl.h"

namespace loom::compress {

#if LOOM_HALF_CODEC_VECTOR
// vcvtps2ph on 8 lanes. A NaN, an Inf or |s| >= 65520 (past 65504, where the reference clamps)
// converts to a code with all exponent bits set; such a step goes through the reference. Below
// 65520 vcvtps2ph gives the clamped value's code.
struct Fp16Format::Avx2 {
  LOOM_HALF_AVX2_INLINE static bool codes16(__m256 s0, __m256 s1, __m256i* codes, __m256* d0,
                                            __m256* d1) {
    const __m128i exp = _mm_set1_epi16(0x7c00);
    const __m128i h0 = _mm256_cvtps_ph(s0, _MM_FROUND_TO_NEAREST_INT);
    const __m128i h1 = _mm256_cvtps_ph(s1, _MM_FROUND_TO_NEAREST_INT);
    const __m128i odd = _mm_or_si128(_mm_cmpeq_epi16(_mm_and_si128(h0, exp), exp),
                                     _mm_cmpeq_epi16(_mm_and_si128(h1, exp), exp));
    if (!_mm_testz_si128(odd, odd)) return false;
    *codes = _mm256_set_m128i(h1, h0);
    *d0 = _mm256_cvtph_ps(h0);
    *d1 = _mm256_cvtph_ps(h1);
    return true;
  }
  LOOM_HALF_AVX2_INLINE static __m256 decode8(__m128i h) { return _mm256_cvtph_ps(h); }
};

#pragma GCC diagnostic push  // see half_avx512.h
#if !defined(__clang__)      // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// vcvtps2ph on 16 lanes. As on 8, a code with all exponent bits set sends the 32 values to the
// reference; below 65520 vcvtps2ph gives the clamped value's code: 65504 < |s| < 65520 rounds to
// 65504. The residual s - half(s) is a float denormal only when s is one (then the code is 0;
// otherwise |s| >= 2^-25 and the residual is a multiple of 2^-48), so a denormal s goes to the
// reference too (vcvtne2ps2bf16 would flush a denormal residual).
struct Fp16Format::Avx512 {
  LOOM_HALF_AVX512_INLINE static bool codes32(__m512 s0, __m512 s1, __m512i* codes, __m512* d0,
                                              __m512* d1) {
    constexpr int kDenormal = half_avx512::kDenormal;
    if ((_mm512_fpclass_ps_mask(s0, kDenormal) | _mm512_fpclass_ps_mask(s1, kDenormal)) != 0)
      return false;
    const __m256i h0 = _mm512_cvtps_ph(s0, _MM_FROUND_TO_NEAREST_INT);
    const __m256i h1 = _mm512_cvtps_ph(s1, _MM_FROUND_TO_NEAREST_INT);
    *codes = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
    if (half_avx512::any_exponent_all_ones(*codes, 0x7c00)) return false;
    *d0 = _mm512_cvtph_ps(h0);
    *d1 = _mm512_cvtph_ps(h1);
    return true;
  }
  LOOM_HALF_AVX512_INLINE static __m512 decode16(__m256i h) { return _mm512_cvtph_ps(h); }
};

#pragma GCC diagnostic pop
#endif

template struct HalfCodecKernels<Fp16Format>;

}  // namespace loom::compress
