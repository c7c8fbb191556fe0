// AVX-512 loop shared by the fp16 and bf16 encoders (included by their .cc files only; every
// function here carries the target attribute, so it is called only after a run-time check).
//
// Why the alignment work: beyond L2 the loop is bound by memory traffic, not arithmetic (one
// that moves the same bytes with no conversion is no faster), and there 64-byte accesses that
// straddle two cache lines cost a lot. Measured on Zen 5, 1.86 M floats, streaming: r 64-byte
// aligned 42 GB/s; the output aligned instead (r and g 16 bytes off) 22 GB/s, below the AVX2
// loop. std::vector gives only 16-byte alignment, so the loop aligns r (read and written, 8 of
// the 14 bytes per element) by a masked head, and when streaming assembles whole aligned output
// lines from consecutive results with a permute. Aligning g too (shifted aligned loads) made
// no measurable difference and was dropped.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "loom/core/cpu_features.h"

#define LOOM_HALF_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq"
#define LOOM_HALF_AVX512 __attribute__((target(LOOM_HALF_AVX512_TARGET)))
#define LOOM_HALF_AVX512_INLINE \
  __attribute__((target(LOOM_HALF_AVX512_TARGET), always_inline)) inline

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized reports; nothing uninitialised is read. The codec files that include this
// header silence it around their AVX-512 code too.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace loom::compress::half_avx512 {

// fpclass categories: QNaN | +Inf | -Inf | SNaN.
constexpr int kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;
constexpr int kNaN = 0x01 | 0x80;

// A codec policy P provides, for 16 values s:
//   __m512 step(__m512 s, __m512i* bits, __mmask16* bad)  the residual s - decode(code); bits
//       holds the 16 codes in a policy-specific layout; bad gets the lanes of non-finite s
//   __m512i join(__m512i bits0, __m512i bits1)  32 codes in order, one 64-byte line
//   __m256i codes16(__m512i bits)               16 codes in order
//   static __m512 decode16(__m256i codes)       16 codes to floats

// Up to 16 values under a lane mask (heads and tails): masked-off lanes read as 0 (finite) and
// are not written.
template <class P>
LOOM_HALF_AVX512_INLINE void masked16(const P& p, const float* g, float* r, uint16_t* out,
                                      __mmask16 m, __mmask16* bad) {
  __m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, g), _mm512_maskz_loadu_ps(m, r));
  __m512i bits;
  _mm512_mask_storeu_ps(r, m, p.step(s, &bits, bad));
  _mm256_mask_storeu_epi16(out, m, p.codes16(bits));
}

// 32 values from g0/g1 (already loaded) and r (64-byte aligned); returns their codes.
template <class P>
LOOM_HALF_AVX512_INLINE __m512i body32(const P& p, __m512 g0, __m512 g1, float* r, __mmask16* bad) {
  __m512i b0, b1;
  __m512 s0 = _mm512_add_ps(g0, _mm512_load_ps(r));
  __m512 s1 = _mm512_add_ps(g1, _mm512_load_ps(r + 16));
  _mm512_store_ps(r, p.step(s0, &b0, bad));
  _mm512_store_ps(r + 16, p.step(s1, &b1, bad));
  return p.join(b0, b1);
}

// Returns false if any g + r is NaN or Inf. kStream: the codes are written as whole aligned
// 64-byte lines with streaming stores.
template <class P, bool kStream>
LOOM_HALF_AVX512 bool encode(const P& p, const float* g, float* r, size_t n, uint16_t* out) {
  __mmask16 bad = 0;
  // Head: up to r + i 64-byte aligned (r is a float*, so 4-byte aligned).
  size_t i = std::min(n, ((64 - reinterpret_cast<uintptr_t>(r) % 64) % 64) / 4);
  if (i) masked16(p, g, r, out, __mmask16((1u << i) - 1), &bad);
  if (i + 32 <= n) {
    // Streaming: the code of element i + j goes to lane d + j of the line at out + i - d, which
    // holds the last d codes of the previous step and the first 32 - d of this one.
    const size_t d = kStream ? (reinterpret_cast<uintptr_t>(out + i) % 64) / 2 : 0;
    const __m512i oidx = _mm512_add_epi16(
        _mm512_set1_epi16(short(32 - d)),
        _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                         12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    __m512i oprev = _mm512_setzero_si512();
    uint16_t* oa = out + i - d;
    bool first = true;
    for (; i + 32 <= n; i += 32, oa += 32) {
      __m512i codes = body32(p, _mm512_loadu_ps(g + i), _mm512_loadu_ps(g + i + 16), r + i, &bad);
      if constexpr (kStream) {
        __m512i line = _mm512_permutex2var_epi16(oprev, oidx, codes);
        if (__builtin_expect(first, 0)) {  // lanes below d belong to values before the loop
          _mm512_mask_storeu_epi16(oa, __mmask32(0xffffffffu << d), line);
          first = false;
        } else {
          _mm512_stream_si512(reinterpret_cast<__m512i*>(oa), line);
        }
        oprev = codes;
      } else {
        _mm512_storeu_si512(out + i, codes);
      }
    }
    if constexpr (kStream) {
      // The last d codes; the rest of their line is written below, by ordinary stores.
      __m512i line = _mm512_permutex2var_epi16(oprev, oidx, _mm512_setzero_si512());
      _mm512_mask_storeu_epi16(oa, __mmask32((uint64_t(1) << d) - 1), line);
      _mm_sfence();  // order the streaming stores before the caller's sends
    }
  }
  if (i + 16 <= n) {
    masked16(p, g + i, r + i, out + i, __mmask16(0xffff), &bad);
    i += 16;
  }
  if (i < n) masked16(p, g + i, r + i, out + i, __mmask16((1u << (n - i)) - 1), &bad);
  return bad == 0;
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

// The codecs' entry points (call after cpu_has_avx512()): P's encode, streaming or not, and
// decode, writing or accumulating.
template <class P>
LOOM_HALF_AVX512 bool encode_any(const float* g, float* r, size_t n, uint16_t* out, bool stream) {
  const P p;
  return stream ? encode<P, true>(p, g, r, n, out) : encode<P, false>(p, g, r, n, out);
}

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
