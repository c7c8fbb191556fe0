#include "loom/compress/fp16_codec.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include "loom/compress/half_avx2.h"
#include "loom/compress/half_avx512.h"
#define LOOM_COMPRESS_F16C 1
#endif

namespace loom::compress {

namespace {

template <class R>
bool encode_ref(const float* g, R* r, size_t n, Half* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + load_residual(r, i);
    ok &= is_finite_bits(s);
    Half h = float_to_half_ref(std::min(std::max(s, -kHalfMax), kHalfMax));
    out[i] = h;
    store_residual(r, i, s - half_to_float_ref(h));
  }
  return ok;
}

}  // namespace

bool fp16_encode_ref(const float* g, float* r, size_t n, Half* out) {
  return encode_ref(g, r, n, out);
}

bool fp16_encode_ref(const float* g, uint16_t* r, size_t n, Half* out) {
  return encode_ref(g, r, n, out);
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

// 16 values a step. A NaN, an Inf or |s| >= 65520 (past 65504, where the reference clamps)
// converts to a code with all exponent bits set; such a step goes through the reference, so
// the loop needs no clamp and matches the reference on every input. Below 65520 vcvtps2ph
// gives the clamped value's code.
template <class R>
bool fp16_encode_vec(const float* g, R* r, size_t n, Half* out) {
  const __m128i exp = _mm_set1_epi16(0x7c00);
  bool ok = true;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 r0, r1;
    half_avx2::load_residual16(r + i, &r0, &r1);
    const __m256 s0 = _mm256_add_ps(_mm256_loadu_ps(g + i), r0);
    const __m256 s1 = _mm256_add_ps(_mm256_loadu_ps(g + i + 8), r1);
    const __m128i h0 = _mm256_cvtps_ph(s0, _MM_FROUND_TO_NEAREST_INT);
    const __m128i h1 = _mm256_cvtps_ph(s1, _MM_FROUND_TO_NEAREST_INT);
    const __m128i odd = _mm_or_si128(_mm_cmpeq_epi16(_mm_and_si128(h0, exp), exp),
                                     _mm_cmpeq_epi16(_mm_and_si128(h1, exp), exp));
    if (__builtin_expect(!_mm_testz_si128(odd, odd), 0)) {
      ok &= fp16_encode_ref(g + i, r + i, 16, out + i);
      continue;
    }
    half_avx2::store_residual16(r + i, _mm256_sub_ps(s0, _mm256_cvtph_ps(h0)),
                                _mm256_sub_ps(s1, _mm256_cvtph_ps(h1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_set_m128i(h1, h0));
  }
  return fp16_encode_ref(g + i, r + i, n - i, out + i) && ok;
}

#pragma GCC diagnostic push  // see half_avx512.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// AVX-512: vcvtps2ph on 16 lanes. A NaN or Inf in s, or |s| >= 65520 (which would round past
// 65504, where the reference clamps), converts to a code with all exponent bits set; any such
// code sends the 32 values to the reference. Below 65520 vcvtps2ph gives the clamped value's
// code: 65504 < |s| < 65520 rounds to 65504. The residual s - half(s) is a float denormal only
// when s is one (then the code is 0; otherwise |s| >= 2^-25 and the residual is a multiple of
// 2^-48), so a denormal s goes to the reference too.
struct Fp16Avx512 {
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

}  // namespace

bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_vec(g, r, n, out);
}

bool fp16_encode_avx2(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_vec(g, r, n, out);
}

namespace {

template <class T>
bool fp16_encode_dispatch(const float* g, T* r, size_t n, Half* out, bool bf16_isa) {
  if (!cpu_has_avx512()) return fp16_encode_vec(g, r, n, out);
  return half_avx512::encode_avx512<Fp16Avx512, Fp16Avx512>(g, r, n, out, encode_ref, bf16_isa);
}

}  // namespace

bool fp16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_dispatch(g, r, n, out, false);
}

bool fp16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_dispatch(g, r, n, out, false);
}

bool fp16_encode(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_dispatch(g, r, n, out, true);
}

bool fp16_encode(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_dispatch(g, r, n, out, true);
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
bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
bool fp16_encode_avx2(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode) {
  fp16_decode_ref(in, n, out, mode);
}
bool fp16_encode(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
bool fp16_encode(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
bool fp16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
bool fp16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Half* out) {
  return fp16_encode_ref(g, r, n, out);
}
void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode) {
  fp16_decode_ref(in, n, out, mode);
}
#endif

bool Fp16Codec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  size_t n = state.n;
  std::memset(out + n * sizeof(Half), 0, encoded_bytes(n) - n * sizeof(Half));
  Half* codes = reinterpret_cast<Half*>(out);
  if (state.residual_format == ResidualFormat::kBf16)
    return fp16_encode(grad, state.residual_bf16.data(), n, codes);
  return fp16_encode(grad, state.residual.data(), n, codes);
}

void Fp16Codec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  fp16_decode(reinterpret_cast<const Half*>(in), n, out, mode);
}

}  // namespace loom::compress
