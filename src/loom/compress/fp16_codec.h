// fp16: IEEE binary16 per element, round to nearest even; magnitudes beyond 65504 saturate
// (the excess stays in the residual) rather than becoming Inf. A 16-bit codec (half_codec.h).
// The residual kept in bfloat16 (the default) holds fp16's rounding error to 2^-20 of the value.
#pragma once

#include <cstdint>

#include "loom/compress/half.h"
#include "loom/compress/half_codec.h"

namespace loom::compress {

using Half = uint16_t;

struct Fp16Format {
  using Code = Half;
  static constexpr const char* kName = "fp16";
  static constexpr float kMax = kHalfMax;
  static Code to_code(float f) { return float_to_half_ref(f); }
  static float from_code(Code h) { return half_to_float_ref(h); }
  // The vector kernels (fp16_codec.cc): vcvtps2ph on 8 lanes (F16C) and on 16 (AVX-512, the
  // same kernel with or without AVX512_BF16).
  struct Avx2;
  struct Avx512;
  using Avx512NoBf16 = Avx512;
};

extern template struct HalfCodecKernels<Fp16Format>;
using Fp16Kernels = HalfCodecKernels<Fp16Format>;
using Fp16Codec = HalfCodec<Fp16Format>;

// The kernels (half_codec.h) by the names the callers use; r: float or bfloat16 bits.
template <class R>
bool fp16_encode_ref(const float* g, R* r, size_t n, Half* out) {
  return Fp16Kernels::encode_ref(g, r, n, out);
}
template <class R>
bool fp16_encode(const float* g, R* r, size_t n, Half* out) {
  return Fp16Kernels::encode(g, r, n, out);
}
template <class R>
bool fp16_encode_avx2(const float* g, R* r, size_t n, Half* out) {
  return Fp16Kernels::encode_avx2(g, r, n, out);
}
template <class R>
bool fp16_encode_avx512_no_bf16(const float* g, R* r, size_t n, Half* out) {
  return Fp16Kernels::encode_avx512_no_bf16(g, r, n, out);
}
inline void fp16_decode_ref(const Half* in, size_t n, float* out, DecodeMode mode) {
  Fp16Kernels::decode_ref(in, n, out, mode);
}
inline void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode) {
  Fp16Kernels::decode(in, n, out, mode);
}
inline void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode) {
  Fp16Kernels::decode_avx2(in, n, out, mode);
}

}  // namespace loom::compress
