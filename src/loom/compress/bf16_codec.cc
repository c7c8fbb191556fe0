#include "loom/compress/bf16_codec.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "loom/compress/half_avx512.h"
#define LOOM_COMPRESS_AVX2 1
#endif

namespace loom::compress {

bool bf16_encode_ref(const float* g, float* r, size_t n, Bf16* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + r[i];
    ok &= is_finite_bits(s);
    Bf16 b = float_to_bf16_ref(std::min(std::max(s, -kBf16Max), kBf16Max));
    out[i] = b;
    r[i] = s - bf16_to_float_ref(b);
  }
  return ok;
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

template <bool kStream>
bool bf16_encode_vec(const float* g, float* r, size_t n, Bf16* out) {
  const __m256 hi = _mm256_set1_ps(kBf16Max), lo = _mm256_set1_ps(-kBf16Max);
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i top = _mm256_set1_epi32(int32_t(0xffff0000u));
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  bool ok = true;
  if constexpr (kStream) {  // scalar head up to a 32-byte aligned out + i (out is 2-aligned)
    size_t head = std::min(n, ((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / 2);
    ok = bf16_encode_ref(g, r, head, out);
    i = head;
  }
  for (; i + 16 <= n; i += 16) {
    __m256i q[2];
    for (int h = 0; h < 2; ++h) {
      float* rp = r + i + 8 * h;
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(g + i + 8 * h), _mm256_loadu_ps(rp));
      __m256i e = _mm256_and_si256(_mm256_castps_si256(s), exp_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));
      __m256i x = _mm256_castps_si256(_mm256_min_ps(_mm256_max_ps(s, lo), hi));
      // round to nearest even: x += 0x7fff + bit 16 of x
      x = _mm256_add_epi32(
          x, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(x, 16), one)));
      x = _mm256_and_si256(x, top);
      _mm256_storeu_ps(rp, _mm256_sub_ps(s, _mm256_castsi256_ps(x)));
      q[h] = _mm256_srli_epi32(x, 16);
    }
    // packus interleaves 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7]; permute back to a0-7 b0-7.
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(q[0], q[1]), 0xd8);
    if constexpr (kStream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), p);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p);
    }
  }
  if constexpr (kStream) _mm_sfence();  // order the streaming stores before the caller's sends
  ok &= bool(_mm256_testz_si256(bad, bad));
  return bf16_encode_ref(g + i, r + i, n - i, out + i) && ok;
}

#pragma GCC diagnostic push  // see half_avx512.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// AVX-512: the AVX2 loop's integer rounding on 16 lanes. (vcvtneps2bf16 is no faster here and
// treats denormal inputs as zero, which the reference does not.)
struct Bf16Avx512 {
  __m512 hi, lo;
  __m512i round, one, top, odd;
  LOOM_HALF_AVX512_INLINE Bf16Avx512()
      : hi(_mm512_set1_ps(kBf16Max)),
        lo(_mm512_set1_ps(-kBf16Max)),
        round(_mm512_set1_epi32(0x7fff)),
        one(_mm512_set1_epi32(1)),
        top(_mm512_set1_epi32(int32_t(0xffff0000u))),
        // the upper 16-bit halves of two vectors of 32-bit lanes, in order
        odd(_mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                             27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1)) {}
  // bits: the rounded value's float bits (code in the upper half of each lane).
  LOOM_HALF_AVX512_INLINE __m512 step(__m512 s, __m512i* bits, __mmask16* bad) const {
    *bad |= _mm512_fpclass_ps_mask(s, half_avx512::kNonFinite);
    // max(lo, s) and min(hi, .) return s when s is NaN (the second operand), as the reference's
    // std::max(s, lo) and std::min(., hi) do; the integer rounding below is then the
    // reference's for NaN bits too.
    __m512i x = _mm512_castps_si512(_mm512_min_ps(hi, _mm512_max_ps(lo, s)));
    // round to nearest even: x += 0x7fff + bit 16 of x
    x = _mm512_add_epi32(x,
                         _mm512_add_epi32(round, _mm512_and_si512(_mm512_srli_epi32(x, 16), one)));
    x = _mm512_and_si512(x, top);
    *bits = x;
    return _mm512_sub_ps(s, _mm512_castsi512_ps(x));
  }
  LOOM_HALF_AVX512_INLINE __m512i join(__m512i b0, __m512i b1) const {
    return _mm512_permutex2var_epi16(b0, odd, b1);
  }
  LOOM_HALF_AVX512_INLINE __m256i codes16(__m512i b) const {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(b, 16));
  }
  LOOM_HALF_AVX512_INLINE static __m512 decode16(__m256i b) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
};

#pragma GCC diagnostic pop

}  // namespace

bool bf16_have_avx512() {
  return cpu_has_avx512();
}

bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out, bool stream) {
  return stream ? bf16_encode_vec<true>(g, r, n, out) : bf16_encode_vec<false>(g, r, n, out);
}

bool bf16_encode(const float* g, float* r, size_t n, Bf16* out, bool stream) {
  if (cpu_has_avx512()) return half_avx512::encode_any<Bf16Avx512>(g, r, n, out, stream);
  return bf16_encode_avx2(g, r, n, out, stream);
}

bool bf16_encode(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode(g, r, n, out, n * sizeof(Bf16) >= kStreamMinBytes);
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
bool bf16_have_avx512() {
  return false;
}
bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out, bool) {
  return bf16_encode_ref(g, r, n, out);
}
void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  bf16_decode_ref(in, n, out, mode);
}
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out, bool) {
  return bf16_encode_ref(g, r, n, out);
}
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out) {
  return bf16_encode_ref(g, r, n, out);
}
void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  bf16_decode_ref(in, n, out, mode);
}
#endif

bool Bf16Codec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  std::memset(out + n * sizeof(Bf16), 0, encoded_bytes(n) - n * sizeof(Bf16));
  return bf16_encode(grad, state.residual.data(), n, reinterpret_cast<Bf16*>(out));
}

void Bf16Codec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  bf16_decode(reinterpret_cast<const Bf16*>(in), n, out, mode);
}

}  // namespace loom::compress
