// The 16-bit codecs (fp16, bf16): each element rounded to nearest even to a 16-bit code;
// magnitudes beyond the format's largest finite value saturate (the excess stays in the
// residual) rather than becoming Inf. 2 bytes per element.
// Packed layout: uint16_t code[n], zero-padded to a multiple of 4 bytes.
//
// One template for both. A Format (fp16_codec.h, bf16_codec.h) says:
//   Code                        the code's type, 16 bits
//   kName                       the codec's name
//   kMax                        the clamp: the largest finite value of the format
//   to_code(float), from_code   the scalar rounding (nearest even, for |x| <= kMax) and its
//                               inverse: the reference every fast kernel matches bit for bit
//   Avx2, Avx512, Avx512NoBf16  the vector kernels, defined in the format's .cc (what each
//                               provides: half_avx2.h, half_avx512.h)
// The format's .cc includes half_codec_impl.h and instantiates HalfCodecKernels<Format>.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "loom/compress/codec.h"

namespace loom::compress {

// Kernels: s = g + r; out = code(clamp(s)); r = s - from_code(out). They return false if any s
// is NaN or Inf. r is the residual as floats or as bfloat16 bits (ResidualFormat::kBf16,
// rounded by residual_to_bf16_ref). _ref is plain scalar; the others match its packed bytes
// and residuals bit for bit, for every input (a step holding a NaN, an Inf or a value past the
// clamp goes through the reference). encode and decode run AVX-512 where the CPU has it (a
// bf16 residual rounded with AVX512_BF16's vcvtne2ps2bf16 where present, in integer
// operations elsewhere), otherwise the AVX2 kernels, which are also callable directly.
template <class Format>
struct HalfCodecKernels {
  using Code = typename Format::Code;
  static_assert(sizeof(Code) == 2);

  static bool encode_ref(const float* g, float* r, size_t n, Code* out);
  static bool encode_ref(const float* g, uint16_t* r, size_t n, Code* out);
  static bool encode(const float* g, float* r, size_t n, Code* out);
  static bool encode(const float* g, uint16_t* r, size_t n, Code* out);
  static bool encode_avx2(const float* g, float* r, size_t n, Code* out);
  static bool encode_avx2(const float* g, uint16_t* r, size_t n, Code* out);
  // The AVX-512 loop a CPU without AVX512_BF16 runs (a bf16 residual rounded in integer
  // operations); the AVX2 kernel where the CPU has no AVX-512. For the tests, which run it on
  // any CPU.
  static bool encode_avx512_no_bf16(const float* g, float* r, size_t n, Code* out);
  static bool encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Code* out);
  static void decode_ref(const Code* in, size_t n, float* out, DecodeMode mode);
  static void decode(const Code* in, size_t n, float* out, DecodeMode mode);
  static void decode_avx2(const Code* in, size_t n, float* out, DecodeMode mode);
};

// The residual starts as bfloat16 (ResidualFormat): the 16-bit rounding error kept to 8
// significant bits, for 4 fewer bytes read and written per element.
template <class Format>
class HalfCodec : public Codec {
 public:
  using Code = typename Format::Code;
  using Kernels = HalfCodecKernels<Format>;

  HalfCodec() { set_residual_format(ResidualFormat::kBf16); }
  std::string name() const override { return Format::kName; }
  bool supports_bf16_residual() const override { return true; }
  size_t encoded_bytes(size_t n) const override { return round_up4(n * sizeof(Code)); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override {
    const size_t n = state.n;
    std::memset(out + n * sizeof(Code), 0, encoded_bytes(n) - n * sizeof(Code));
    Code* codes = reinterpret_cast<Code*>(out);
    if (state.residual_format == ResidualFormat::kBf16)
      return Kernels::encode(grad, state.residual_bf16.data(), n, codes);
    return Kernels::encode(grad, state.residual.data(), n, codes);
  }
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override {
    Kernels::decode(reinterpret_cast<const Code*>(in), n, out, mode);
  }
  // The encoder clamps to +-kMax, so no code is Inf or NaN, and it zeroes the padding.
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override {
    const Code* codes = reinterpret_cast<const Code*>(in);
    for (size_t i = 0; i < n; ++i) {
      const float v = Format::from_code(codes[i]);
      if (!(v >= -Format::kMax && v <= Format::kMax))
        payload_error(what, name(), n,
                      "element " + std::to_string(i) + " has code " + std::to_string(codes[i]) +
                          ", which is " + (v != v ? "NaN" : "Inf"));
    }
    if (!zero_bytes(in, n * sizeof(Code), encoded_bytes(n)))
      payload_error(what, name(), n, "the padding after the codes is not zero");
  }
};

}  // namespace loom::compress
