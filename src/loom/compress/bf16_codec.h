// bf16: the top 16 bits of each float, round to nearest even; magnitudes beyond the largest
// finite bfloat16 saturate. Same range as fp32, 8 bits of precision. A 16-bit codec
// (half_codec.h). The residual kept in bfloat16 (the default) holds bf16's rounding error to
// 2^-17 of the value.
#pragma once

#include <cstdint>

#include "loom/compress/half.h"
#include "loom/compress/half_codec.h"

namespace loom::compress {

using Bf16 = uint16_t;

struct Bf16Format {
  using Code = Bf16;
  static constexpr const char* kName = "bf16";
  static constexpr float kMax = kBf16Max;
  static Code to_code(float f) { return float_to_bf16_ref(f); }
  static float from_code(Code b) { return bf16_to_float_ref(b); }
  // The vector kernels (bf16_codec.cc): integer rounding on 8 lanes; on 16, vcvtne2ps2bf16
  // (AVX512_BF16) or integer rounding.
  struct Avx2;
  struct Avx512;
  struct Avx512NoBf16;
};

extern template struct HalfCodecKernels<Bf16Format>;
using Bf16Kernels = HalfCodecKernels<Bf16Format>;
using Bf16Codec = HalfCodec<Bf16Format>;

// The kernels (half_codec.h) by the names the callers use; r: float or bfloat16 bits.
template <class R>
bool bf16_encode_ref(const float* g, R* r, size_t n, Bf16* out) {
  return Bf16Kernels::encode_ref(g, r, n, out);
}
template <class R>
bool bf16_encode(const float* g, R* r, size_t n, Bf16* out) {
  return Bf16Kernels::encode(g, r, n, out);
}
template <class R>
bool bf16_encode_avx2(const float* g, R* r, size_t n, Bf16* out) {
  return Bf16Kernels::encode_avx2(g, r, n, out);
}
template <class R>
bool bf16_encode_avx512_no_bf16(const float* g, R* r, size_t n, Bf16* out) {
  return Bf16Kernels::encode_avx512_no_bf16(g, r, n, out);
}
inline void bf16_decode_ref(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  Bf16Kernels::decode_ref(in, n, out, mode);
}
inline void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  Bf16Kernels::decode(in, n, out, mode);
}
inline void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode) {
  Bf16Kernels::decode_avx2(in, n, out, mode);
}

}  // namespace loom::compress
