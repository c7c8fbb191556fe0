// AVX-512 loops shared by the 16-bit codecs (half_codec.h; included by half_codec_impl.h only;
// every function here carries a target attribute, so it is called only after a run-time check).
//
// The encoder's loop is the common case only: 32 values a step whose codes are all finite. A
// step that holds a NaN, an Inf or a magnitude past the format's clamp, and the unaligned head
// and the tail, go through the codec's scalar reference, which defines the bits: so the vector
// loop needs no clamps, no NaN rules and no masks. The loop is as close to its vector-op budget
// as to memory bandwidth, so each of those would cost the common case (docs/compress.md has
// the measurements).
//
// Why the alignment head: 64-byte accesses that straddle two cache lines cost a lot beyond L2.
// The loop aligns r (read and written: the most bytes per element). Aligning g too (shifted
// aligned loads) gains nothing measurable.
//
// The codes are written with ordinary stores. Streaming (non-temporal) stores make encode alone
// faster but send the codes to DRAM, where whoever reads them next (the decoder, the transport)
// then fetches them: encode + decode is as slow or slower at every size.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "loom/compress/half.h"
#include "loom/core/cpu_features.h"

#define LOOM_HALF_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq"
#define LOOM_HALF_AVX512 __attribute__((target(LOOM_HALF_AVX512_TARGET)))
#define LOOM_HALF_AVX512_INLINE \
  __attribute__((target(LOOM_HALF_AVX512_TARGET), always_inline)) inline
// The encoders also round the residual with vcvtne2ps2bf16 (cpu_has_avx512_bf16()).
#define LOOM_HALF_AVX512_ENCODE_TARGET LOOM_HALF_AVX512_TARGET ",avx512bf16"
#define LOOM_HALF_AVX512_ENCODE __attribute__((target(LOOM_HALF_AVX512_ENCODE_TARGET)))
#define LOOM_HALF_AVX512_ENCODE_INLINE \
  __attribute__((target(LOOM_HALF_AVX512_ENCODE_TARGET), always_inline)) inline

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized reports; nothing uninitialised is read. The codec files that include this
// header silence it around their AVX-512 code too.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace loom::compress::half_avx512 {

// fpclass category: denormal.
constexpr int kDenormal = 0x20;

// Whether any of 32 16-bit codes has every bit of `exp` set (Inf or NaN in fp16 or bfloat16).
LOOM_HALF_AVX512_INLINE bool any_exponent_all_ones(__m512i codes, short exp) {
  const __m512i e = _mm512_set1_epi16(exp);
  return _mm512_cmpeq_epi16_mask(_mm512_and_si512(codes, e), e) != 0;
}

// A format's AVX-512 kernels P (Format::Avx512, Format::Avx512NoBf16) provide:
//   static bool codes32(__m512 s0, __m512 s1, __m512i* codes, __m512* d0, __m512* d1)
//       the 32 codes of s0, s1 in order and their decoded values; false if the reference must
//       encode these 32 (a NaN, an Inf, a magnitude past the clamp, or a residual s - d that
//       would be a float denormal), and then the outputs are unused
//   static __m512 decode16(__m256i codes)  16 codes to floats (Format::Avx512's only: the
//       decoders need no AVX512_BF16)
//
// A residual policy R (F32Residual, Bf16Residual, Bf16ResidualInt) says how the residual is
// stored: R::T its element type; load32 / store32 for 32 values whose first is 64-byte aligned.
// Bf16Residual rounds with vcvtne2ps2bf16 (AVX512_BF16), which is residual_to_bf16_ref's nearest
// even for finite values within range but flushes float denormals: hence codes32's last
// condition. (Testing the residuals themselves for denormals would put the test at the end of
// the dependency chain; the test on s, which P can make, is off the chain.)
// Bf16ResidualInt rounds in integer operations, for CPUs without AVX512_BF16.

struct F32Residual {
  using T = float;
  LOOM_HALF_AVX512_INLINE static void load32(const float* r, __m512* v0, __m512* v1) {
    *v0 = _mm512_load_ps(r);
    *v1 = _mm512_load_ps(r + 16);
  }
  LOOM_HALF_AVX512_INLINE static void store32(float* r, __m512 v0, __m512 v1) {
    _mm512_store_ps(r, v0);
    _mm512_store_ps(r + 16, v1);
  }
};

// 32 bfloat16 values to two vectors of 16 floats: word k of b (k < 16) to the upper half of
// dword k of v0, zeros below; words 16..31 to v1. One permute per 16 instead of a zero-extension
// and a shift.
LOOM_HALF_AVX512_INLINE void widen_bf16x32(__m512i b, __m512* v0, __m512* v1) {
  const __m512i lo = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6,
                                      0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  *v0 = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, lo, b));
  *v1 = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, hi, b));
}

// Nearest even in integer operations: x + 0x7fff + bit 16 of x, the bfloat16 in the upper half
// of each 32-bit lane (garbage below).
LOOM_HALF_AVX512_INLINE __m512i bf16_round_upper(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
}

// The upper 16-bit halves of the 32-bit lanes of a, then of b: 32 values in order.
LOOM_HALF_AVX512_INLINE __m512i upper_halves(__m512i a, __m512i b) {
  const __m512i odd =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(a, odd, b);
}

struct Bf16Residual {
  using T = uint16_t;
  LOOM_HALF_AVX512_INLINE static void load32(const uint16_t* r, __m512* v0, __m512* v1) {
    widen_bf16x32(_mm512_load_si512(r), v0, v1);
  }
  LOOM_HALF_AVX512_ENCODE_INLINE static void store32(uint16_t* r, __m512 v0, __m512 v1) {
    _mm512_store_si512(r, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
  }
};

struct Bf16ResidualInt {
  using T = uint16_t;
  LOOM_HALF_AVX512_INLINE static void load32(const uint16_t* r, __m512* v0, __m512* v1) {
    widen_bf16x32(_mm512_load_si512(r), v0, v1);
  }
  LOOM_HALF_AVX512_INLINE static void store32(uint16_t* r, __m512 v0, __m512 v1) {
    _mm512_store_si512(r, upper_halves(bf16_round_upper(v0), bf16_round_upper(v1)));
  }
};

// The encode loop, defined twice by this macro: `encode` with the BF16 target (for the policies
// that use vcvtne2ps2bf16) and `encode_no_bf16` without it. A GCC target attribute cannot
// depend on a template parameter, and a policy can be inlined only into a function whose target
// includes its own.
//
// Returns false if any g + r is NaN or Inf. ref is the codec's scalar reference for this
// residual type, a function object (a direct call, which can be inlined).
#define LOOM_HALF_AVX512_ENCODE_LOOP(NAME, TARGET_ATTR)                                         \
  template <class P, class R, class Ref>                                                        \
  TARGET_ATTR bool NAME(const float* g, typename R::T* r, size_t n, uint16_t* out, Ref ref) {   \
    /* Head: up to r + i 64-byte aligned (r is 2- or 4-byte aligned: up to 31 or 15 values). */ \
    const size_t head =                                                                         \
        std::min(n, ((64 - reinterpret_cast<uintptr_t>(r) % 64) % 64) / sizeof(typename R::T)); \
    bool ok = ref(g, r, head, out);                                                             \
    size_t i = head;                                                                            \
    for (; i + 32 <= n; i += 32) {                                                              \
      __m512 r0, r1;                                                                            \
      R::load32(r + i, &r0, &r1);                                                               \
      const __m512 s0 = _mm512_add_ps(_mm512_loadu_ps(g + i), r0);                              \
      const __m512 s1 = _mm512_add_ps(_mm512_loadu_ps(g + i + 16), r1);                         \
      __m512i codes;                                                                            \
      __m512 d0, d1;                                                                            \
      if (__builtin_expect(P::codes32(s0, s1, &codes, &d0, &d1), 1)) {                          \
        R::store32(r + i, _mm512_sub_ps(s0, d0), _mm512_sub_ps(s1, d1));                        \
        _mm512_storeu_si512(out + i, codes);                                                    \
      } else {                                                                                  \
        ok &= ref(g + i, r + i, 32, out + i); /* r + i is as it was: only loaded so far */      \
      }                                                                                         \
    }                                                                                           \
    return ref(g + i, r + i, n - i, out + i) && ok;                                             \
  }

LOOM_HALF_AVX512_ENCODE_LOOP(encode, LOOM_HALF_AVX512_ENCODE)
LOOM_HALF_AVX512_ENCODE_LOOP(encode_no_bf16, LOOM_HALF_AVX512)
#undef LOOM_HALF_AVX512_ENCODE_LOOP

// The residual policies of a residual element type: with vcvtne2ps2bf16, and without.
template <class T>
struct ResidualPolicies;
template <>
struct ResidualPolicies<float> {
  using Bf16Isa = F32Residual;
  using Int = F32Residual;
};
template <>
struct ResidualPolicies<uint16_t> {
  using Bf16Isa = Bf16Residual;
  using Int = Bf16ResidualInt;
};

// A 16-bit codec's AVX-512 encode (call after cpu_has_avx512()): codes by P, with the BF16
// residual policy, where the CPU has AVX512_BF16 and `bf16_isa` allows it (the tests turn it
// off to run the other loop); else codes by PNoBf16 and everything in integer operations.
template <class P, class PNoBf16, class T, class Ref>
bool encode_avx512(const float* g, T* r, size_t n, uint16_t* out, Ref ref, bool bf16_isa) {
  if (bf16_isa && cpu_has_avx512_bf16())
    return encode<P, typename ResidualPolicies<T>::Bf16Isa>(g, r, n, out, ref);
  return encode_no_bf16<PNoBf16, typename ResidualPolicies<T>::Int>(g, r, n, out, ref);
}

// Decode: 16 codes to floats by P::decode16 (a __m256i of codes to __m512), written or added.
template <class P, bool kAccumulate>
LOOM_HALF_AVX512_INLINE void decode16(const uint16_t* in, float* out, __mmask16 m) {
  __m512 v = P::decode16(_mm256_maskz_loadu_epi16(m, in));
  if constexpr (kAccumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, out), v);
  _mm512_mask_storeu_ps(out, m, v);
}

// out + i is 64-byte aligned in the loop (out is written, 4 bytes per element, in only read, 2).
template <class P, bool kAccumulate>
LOOM_HALF_AVX512 void decode(const uint16_t* in, size_t n, float* out) {
  size_t i = std::min(n, ((64 - reinterpret_cast<uintptr_t>(out) % 64) % 64) / 4);
  if (i) decode16<P, kAccumulate>(in, out, __mmask16((1u << i) - 1));
  for (; i + 32 <= n; i += 32) {
    __m512 v0 = P::decode16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    __m512 v1 = P::decode16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 16)));
    if constexpr (kAccumulate) {
      v0 = _mm512_add_ps(_mm512_load_ps(out + i), v0);
      v1 = _mm512_add_ps(_mm512_load_ps(out + i + 16), v1);
    }
    _mm512_store_ps(out + i, v0);
    _mm512_store_ps(out + i + 16, v1);
  }
  for (; i + 16 <= n; i += 16) decode16<P, kAccumulate>(in + i, out + i, __mmask16(0xffff));
  if (i < n) decode16<P, kAccumulate>(in + i, out + i, __mmask16((1u << (n - i)) - 1));
}

// The decoders' entry point (call after cpu_has_avx512()): writing or accumulating.

template <class P>
LOOM_HALF_AVX512 void decode_any(const uint16_t* in, size_t n, float* out, bool accumulate) {
  if (accumulate) {
    decode<P, true>(in, n, out);
  } else {
    decode<P, false>(in, n, out);
  }
}

}  // namespace loom::compress::half_avx512

#pragma GCC diagnostic pop
