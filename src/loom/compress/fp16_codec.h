// fp16: IEEE binary16 per element, round to nearest even; magnitudes beyond 65504 saturate
// (the excess stays in the residual) rather than becoming Inf. 2 bytes per element.
// Packed layout: uint16_t half[n], zero-padded to a multiple of 4 bytes.
#pragma once

#include <cstdint>

#include "loom/compress/codec.h"

namespace loom::compress {

using Half = uint16_t;
static_assert(sizeof(Half) == 2);

// Kernels: s = g + r; out = half(s); r = s - float(out). They return false if any s is NaN or
// Inf. r is the residual as floats or as bfloat16 bits (ResidualFormat::kBf16, rounded by
// residual_to_bf16_ref). _ref is plain scalar; the others match its packed bytes and residuals
// bit for bit. fp16_encode and fp16_decode run AVX-512 where the CPU has it (a bf16 residual is
// rounded with BF16's vcvtne2ps2bf16 where present, in integer operations elsewhere), otherwise
// the F16C/AVX2 kernels, which are also callable directly. Every encoder matches the reference
// for every input (a step holding a NaN, an Inf or a value past the clamp goes through it).
bool fp16_encode_ref(const float* g, float* r, size_t n, Half* out);
bool fp16_encode_ref(const float* g, uint16_t* r, size_t n, Half* out);
bool fp16_encode(const float* g, float* r, size_t n, Half* out);
bool fp16_encode(const float* g, uint16_t* r, size_t n, Half* out);
bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out);
bool fp16_encode_avx2(const float* g, uint16_t* r, size_t n, Half* out);
// The AVX-512 loop a CPU without AVX512_BF16 runs (a bf16 residual rounded in integer
// operations); the AVX2 kernel where the CPU has no AVX-512. For the tests, which run it on any
// CPU.
bool fp16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Half* out);
bool fp16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Half* out);
void fp16_decode_ref(const Half* in, size_t n, float* out, DecodeMode mode);
void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode);
void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode);

// The residual starts as bfloat16 (ResidualFormat): fp16's rounding error kept to 2^-20 of
// the value, for 4 fewer bytes read and written per element.
class Fp16Codec : public Codec {
 public:
  Fp16Codec() { set_residual_format(ResidualFormat::kBf16); }
  std::string name() const override { return "fp16"; }
  bool supports_bf16_residual() const override { return true; }
  size_t encoded_bytes(size_t n) const override { return round_up4(n * sizeof(Half)); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
};

}  // namespace loom::compress
