#include "loom/compress/bf16_codec.h"

#include "loom/compress/half_codec_impl.h"

namespace loom::compress {

#if LOOM_HALF_CODEC_VECTOR
// Integer rounding on 8 lanes. |s| >= 0x7f7f8000 (a NaN, an Inf, or a value that rounds past
// the largest finite bfloat16, where the reference clamps) sends the step to the reference.
struct Bf16Format::Avx2 {
  // Nearest even: x + 0x7fff + bit 16 of x, the lower half cleared: the decoded value, whose
  // upper half is the code.
  LOOM_HALF_AVX2_INLINE static __m256i round8(__m256 s) {
    const __m256i x = _mm256_castps_si256(s);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    return _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)),
                            _mm256_set1_epi32(int32_t(0xffff0000u)));
  }
  LOOM_HALF_AVX2_INLINE static bool codes16(__m256 s0, __m256 s1, __m256i* codes, __m256* d0,
                                            __m256* d1) {
    // both sides non-negative as int32, so the signed compare is the unsigned one
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), below = _mm256_set1_epi32(0x7f7f7fff);
    const __m256i big =
        _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(s0), abs), below),
                        _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(s1), abs), below));
    if (!_mm256_testz_si256(big, big)) return false;
    const __m256i x0 = round8(s0), x1 = round8(s1);
    *d0 = _mm256_castsi256_ps(x0);
    *d1 = _mm256_castsi256_ps(x1);
    // packus interleaves 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7]; permute back to a0-7 b0-7.
    *codes = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_srli_epi32(x0, 16), _mm256_srli_epi32(x1, 16)), 0xd8);
    return true;
  }
  LOOM_HALF_AVX2_INLINE static __m256 decode8(__m128i b) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
  }
};

#pragma GCC diagnostic push  // see half_avx512.h
#if !defined(__clang__)      // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// vcvtne2ps2bf16, which rounds as the reference for every finite float but the denormals (it
// reads them as zero). The 32 values go to the reference when some |s| is >= 0x7f7f8000 (a NaN,
// an Inf, or a value that rounds past the largest finite bfloat16, where the reference clamps)
// or nonzero below 2^-103: then s is a denormal, or its residual (a multiple of 2^(E-23) for |s|
// in [2^E, 2^(E+1))) may be one, which the bf16 residual's vcvtne2ps2bf16 would flush.
// Otherwise the unclamped rounding gives the clamped value's code. One instruction per 32 codes
// is faster than the integer rounding (docs/compress.md).
struct Bf16Format::Avx512 {
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
struct Bf16Format::Avx512NoBf16 {
  LOOM_HALF_AVX512_INLINE static bool codes32(__m512 s0, __m512 s1, __m512i* codes, __m512* d0,
                                              __m512* d1) {
    if ((Avx512::odd16(s0) | Avx512::odd16(s1)) != 0) return false;
    const __m512i top = _mm512_set1_epi32(int32_t(0xffff0000u));
    const __m512i x0 = half_avx512::bf16_round_upper(s0), x1 = half_avx512::bf16_round_upper(s1);
    *codes = half_avx512::upper_halves(x0, x1);
    *d0 = _mm512_castsi512_ps(_mm512_and_si512(x0, top));
    *d1 = _mm512_castsi512_ps(_mm512_and_si512(x1, top));
    return true;
  }
};

#pragma GCC diagnostic pop
#endif

template struct HalfCodecKernels<Bf16Format>;

}  // namespace loom::compress
