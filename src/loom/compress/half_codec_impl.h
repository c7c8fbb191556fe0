// HalfCodecKernels' definitions, for the format's .cc, which defines the format's vector kernels
// (Format::Avx2, Avx512, Avx512NoBf16) where LOOM_HALF_CODEC_VECTOR is set and then instantiates
// HalfCodecKernels<Format>. Without AVX2 and F16C at compile time every kernel is the reference.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "loom/compress/half.h"
#include "loom/compress/half_codec.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include "loom/compress/half_avx2.h"
#include "loom/compress/half_avx512.h"
#include "loom/core/cpu_features.h"
#define LOOM_HALF_CODEC_VECTOR 1
#else
#define LOOM_HALF_CODEC_VECTOR 0
#endif

namespace loom::compress {
namespace half_codec {

// Always inlined: the vector loops run it for a rare step, and a call there clobbers every
// vector register, so the hot path would rebuild a constant each step.
template <class F, class R>
[[gnu::always_inline]] inline bool encode_ref(const float* g, R* r, size_t n, uint16_t* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + load_residual(r, i);
    ok &= is_finite_bits(s);
    uint16_t c = F::to_code(std::min(std::max(s, -F::kMax), F::kMax));
    out[i] = c;
    store_residual(r, i, s - F::from_code(c));
  }
  return ok;
}

template <class F>
void decode_ref(const uint16_t* in, size_t n, float* out, DecodeMode mode) {
  if (mode == DecodeMode::kWrite) {
    for (size_t i = 0; i < n; ++i) out[i] = F::from_code(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += F::from_code(in[i]);
  }
}

// The references as function objects, which the vector loops call directly (and can inline).
template <class F>
struct EncodeRef {
  template <class R>
  bool operator()(const float* g, R* r, size_t n, uint16_t* out) const {
    return encode_ref<F>(g, r, n, out);
  }
};
template <class F>
struct DecodeRef {
  void operator()(const uint16_t* in, size_t n, float* out, DecodeMode mode) const {
    decode_ref<F>(in, n, out, mode);
  }
};

template <class F, class R>
bool encode_avx2(const float* g, R* r, size_t n, uint16_t* out) {
#if LOOM_HALF_CODEC_VECTOR
  return half_avx2::encode<typename F::Avx2>(g, r, n, out, EncodeRef<F>{});
#else
  return encode_ref<F>(g, r, n, out);
#endif
}

// bf16_isa: whether the AVX-512 loop may use AVX512_BF16 where the CPU has it (the tests turn it
// off to run the other loop on any CPU).
template <class F, class R>
bool encode(const float* g, R* r, size_t n, uint16_t* out, bool bf16_isa) {
#if LOOM_HALF_CODEC_VECTOR
  if (!cpu_has_avx512()) return encode_avx2<F>(g, r, n, out);
  return half_avx512::encode_avx512<typename F::Avx512, typename F::Avx512NoBf16>(
      g, r, n, out, EncodeRef<F>{}, bf16_isa);
#else
  (void)bf16_isa;
  return encode_ref<F>(g, r, n, out);
#endif
}

template <class F>
void decode_avx2(const uint16_t* in, size_t n, float* out, DecodeMode mode) {
#if LOOM_HALF_CODEC_VECTOR
  half_avx2::decode_any<typename F::Avx2>(in, n, out, mode, DecodeRef<F>{});
#else
  decode_ref<F>(in, n, out, mode);
#endif
}

template <class F>
void decode(const uint16_t* in, size_t n, float* out, DecodeMode mode) {
#if LOOM_HALF_CODEC_VECTOR
  if (cpu_has_avx512()) {
    half_avx512::decode_any<typename F::Avx512>(in, n, out, mode == DecodeMode::kAccumulate);
    return;
  }
#endif
  decode_avx2<F>(in, n, out, mode);
}

}  // namespace half_codec

template <class F>
bool HalfCodecKernels<F>::encode_ref(const float* g, float* r, size_t n, Code* out) {
  return half_codec::encode_ref<F>(g, r, n, out);
}
template <class F>
bool HalfCodecKernels<F>::encode_ref(const float* g, uint16_t* r, size_t n, Code* out) {
  return half_codec::encode_ref<F>(g, r, n, out);
}
template <class F>
bool HalfCodecKernels<F>::encode(const float* g, float* r, size_t n, Code* out) {
  return half_codec::encode<F>(g, r, n, out, true);
}
template <class F>
bool HalfCodecKernels<F>::encode(const float* g, uint16_t* r, size_t n, Code* out) {
  return half_codec::encode<F>(g, r, n, out, true);
}
template <class F>
bool HalfCodecKernels<F>::encode_avx2(const float* g, float* r, size_t n, Code* out) {
  return half_codec::encode_avx2<F>(g, r, n, out);
}
template <class F>
bool HalfCodecKernels<F>::encode_avx2(const float* g, uint16_t* r, size_t n, Code* out) {
  return half_codec::encode_avx2<F>(g, r, n, out);
}
template <class F>
bool HalfCodecKernels<F>::encode_avx512_no_bf16(const float* g, float* r, size_t n, Code* out) {
  return half_codec::encode<F>(g, r, n, out, false);
}
template <class F>
bool HalfCodecKernels<F>::encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Code* out) {
  return half_codec::encode<F>(g, r, n, out, false);
}
template <class F>
void HalfCodecKernels<F>::decode_ref(const Code* in, size_t n, float* out, DecodeMode mode) {
  half_codec::decode_ref<F>(in, n, out, mode);
}
template <class F>
void HalfCodecKernels<F>::decode(const Code* in, size_t n, float* out, DecodeMode mode) {
  half_codec::decode<F>(in, n, out, mode);
}
template <class F>
void HalfCodecKernels<F>::decode_avx2(const Code* in, size_t n, float* out, DecodeMode mode) {
  half_codec::decode_avx2<F>(in, n, out, mode);
}

}  // namespace loom::compress
