#include "loom/compress/fp16_codec.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include "loom/compress/half_avx512.h"
#define LOOM_COMPRESS_F16C 1
#endif

namespace loom::compress {

bool fp16_encode_ref(const float* g, float* r, size_t n, Half* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + r[i];
    ok &= is_finite_bits(s);
    Half h = float_to_half_ref(std::min(std::max(s, -kHalfMax), kHalfMax));
    out[i] = h;
    r[i] = s - half_to_float_ref(h);
  }
  return ok;
}

void fp16_decode_ref(const Half* in, size_t n, float* out, DecodeMode mode) {
  if (mode == DecodeMode::kWrite) {
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float_ref(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += half_to_float_ref(in[i]);
  }
}

#if LOOM_COMPRESS_F16C
namespace {

template <bool kStream>
bool fp16_encode_vec(const float* g, float* r, size_t n, Half* out) {
  const __m256 hi = _mm256_set1_ps(kHalfMax), lo = _mm256_set1_ps(-kHalfMax);
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  bool ok = true;
  if constexpr (kStream) {  // scalar head up to a 32-byte aligned out + i (out is 2-aligned)
    size_t head = std::min(n, ((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / 2);
    ok = fp16_encode_ref(g, r, head, out);
    i = head;
  }
  // 16 elements a step: one whole 32-byte store of halves (streaming stores fill their
  // write-combining buffer in fewer, larger pieces).
  for (; i + 16 <= n; i += 16) {
    __m128i h[2];
    for (int k = 0; k < 2; ++k) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(g + i + 8 * k), _mm256_loadu_ps(r + i + 8 * k));
      __m256i e = _mm256_and_si256(_mm256_castps_si256(s), exp_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));
      h[k] = _mm256_cvtps_ph(_mm256_min_ps(_mm256_max_ps(s, lo), hi), _MM_FROUND_TO_NEAREST_INT);
      _mm256_storeu_ps(r + i + 8 * k, _mm256_sub_ps(s, _mm256_cvtph_ps(h[k])));
    }
    __m256i p = _mm256_set_m128i(h[1], h[0]);
    if constexpr (kStream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), p);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p);
    }
  }
  if constexpr (kStream) _mm_sfence();  // order the streaming stores before the caller's sends
  ok &= bool(_mm256_testz_si256(bad, bad));
  return fp16_encode_ref(g + i, r + i, n - i, out + i) && ok;
}

#pragma GCC diagnostic push  // see half_avx512.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// AVX-512: vcvtps2ph on 16 lanes, otherwise the AVX2 loop's operations.
struct Fp16Avx512 {
  __m512 hi, lo;
  LOOM_HALF_AVX512_INLINE Fp16Avx512()
      : hi(_mm512_set1_ps(kHalfMax)), lo(_mm512_set1_ps(-kHalfMax)) {}
  LOOM_HALF_AVX512_INLINE __m512 step(__m512 s, __m512i* bits, __mmask16* bad) const {
    // max(lo, s) and min(hi, .) return s when s is NaN (the second operand), as the reference's
    // std::max(s, lo) and std::min(., hi) do.
    __m512 c = _mm512_min_ps(hi, _mm512_max_ps(lo, s));
    __mmask16 nf = _mm512_fpclass_ps_mask(s, half_avx512::kNonFinite);
    if (__builtin_expect(nf != 0, 0)) {
      *bad |= nf;
      // vcvtps2ph keeps a NaN's top payload bits, the reference returns the plain quiet NaN:
      // convert that one (sign | 0x7fc00000 -> sign | 0x7e00) instead.
      __m512i q = _mm512_or_si512(
          _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(int32_t(0x80000000u))),
          _mm512_set1_epi32(0x7fc00000));
      c = _mm512_mask_mov_ps(c, _mm512_fpclass_ps_mask(s, half_avx512::kNaN),
                             _mm512_castsi512_ps(q));
    }
    __m256i h = _mm512_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT);
    *bits = _mm512_castsi256_si512(h);
    return _mm512_sub_ps(s, _mm512_cvtph_ps(h));
  }
  LOOM_HALF_AVX512_INLINE __m512i join(__m512i b0, __m512i b1) const {
    return _mm512_inserti64x4(b0, _mm512_castsi512_si256(b1), 1);
  }
  LOOM_HALF_AVX512_INLINE __m256i codes16(__m512i b) const { return _mm512_castsi512_si256(b); }
  LOOM_HALF_AVX512_INLINE static __m512 decode16(__m256i h) { return _mm512_cvtph_ps(h); }
};

#pragma GCC diagnostic pop

}  // namespace

bool fp16_have_avx512() {
  return cpu_has_avx512();
}

bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out, bool stream) {
  return stream ? fp16_encode_vec<true>(g, r, n, out) : fp16_encode_vec<false>(g, r, n, out);
}

bool fp16_encode(const float* g, float* r, size_t n, Half* out, bool stream) {
  if (cpu_has_avx512()) return half_avx512::encode_any<Fp16Avx512>(g, r, n, out, stream);
  return fp16_encode_avx2(g, r, n, out, stream);
}

bool fp16_encode(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode(g, r, n, out, n * sizeof(Half) >= kStreamMinBytes);
}

void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode) {
  size_t i = 0;
  if (mode == DecodeMode::kWrite) {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_cvtph_ps(h)));
    }
  }
  fp16_decode_ref(in + i, n - i, out + i, mode);
}

void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode) {
  if (cpu_has_avx512()) {
    half_avx512::decode_any<Fp16Avx512>(in, n, out, mode == DecodeMode::kAccumulate);
  } else {
    fp16_decode_avx2(in, n, out, mode);
  }
}
#else
bool fp16_have_avx512() {
  return false;
}
bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out, bool) {
  return fp16_encode_ref(g, r, n, out);
}
void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode) {
  fp16_decode_ref(in, n, out, mode);
}
bool fp16_encode(const float* g, float* r, size_t n, Half* out, bool) {
  return fp16_encode_ref(g, r, n, out);
}
bool fp16_encode(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode) {
  fp16_decode_ref(in, n, out, mode);
}
#endif

bool Fp16Codec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  std::memset(out + n * sizeof(Half), 0, encoded_bytes(n) - n * sizeof(Half));
  return fp16_encode(grad, state.residual.data(), n, reinterpret_cast<Half*>(out));
}

void Fp16Codec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  fp16_decode(reinterpret_cast<const Half*>(in), n, out, mode);
}

}  // namespace loom::compress
