// Scalar IEEE binary16 and bfloat16 conversions, round to nearest even. These are the
// reference the vectorised codecs are tested against bit for bit (F16C's vcvtps2ph rounds the
// same way).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace loom::compress {

inline constexpr float kHalfMax = 65504.0f;
// The largest finite bfloat16, 0x7f7f: 3.3895314e38.
inline constexpr float kBf16Max = std::bit_cast<float>(uint32_t{0x7f7f0000});

inline uint16_t float_to_half_ref(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (ax >= 0x38800000u) {                                 // a normal half (>= 2^-14)
    uint32_t m = ax - (112u << 23);                        // rebias the exponent 127 -> 15
    m += 0xfffu + ((m >> 13) & 1u);                        // round to nearest even at bit 13
    return uint16_t(sign | (m >> 13));
  }
  if (ax <= 0x33000000u) return uint16_t(sign);  // <= 2^-25: the tie at 2^-25 goes to even 0
  // A subnormal half: h * 2^-24 with h = mantissa * 2^(exp - 126), rounded to nearest even.
  uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - (ax >> 23);  // 14 .. 24
  uint32_t h = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal
  return uint16_t(sign | h);
}

inline float half_to_float_ref(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0) {
    float v = float(m) * 0x1p-24f;  // exact: subnormal or zero
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16: the top 16 bits of a float, rounded to nearest even. Inputs must be finite and
// within +-kBf16Max (the codec clamps first).
inline uint16_t float_to_bf16_ref(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

inline float bf16_to_float_ref(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

// A residual kept as bfloat16 (ResidualFormat::kBf16): nearest even, after a clamp to the
// finite range (so a huge residual, from a value fp16 saturated, stays finite). Float denormals
// round as bit patterns too (vcvtne2ps2bf16 would flush them, so the AVX-512 loop leaves steps
// that hold one to the reference).
inline uint16_t residual_to_bf16_ref(float v) {
  return float_to_bf16_ref(v < -kBf16Max ? -kBf16Max : (v > kBf16Max ? kBf16Max : v));
}

// The scalar encoders' residual access, for either format: float (exact) or bfloat16 bits.
inline float load_residual(const float* r, size_t i) {
  return r[i];
}
inline float load_residual(const uint16_t* r, size_t i) {
  return bf16_to_float_ref(r[i]);
}
inline void store_residual(float* r, size_t i, float v) {
  r[i] = v;
}
inline void store_residual(uint16_t* r, size_t i, float v) {
  r[i] = residual_to_bf16_ref(v);
}

inline bool is_finite_bits(float f) {
  return (std::bit_cast<uint32_t>(f) & 0x7f800000u) != 0x7f800000u;
}

}  // namespace loom::compress
