// bf16: the top 16 bits of each float, round to nearest even; magnitudes beyond the largest
// finite bfloat16 saturate. 2 bytes per element; same range as fp32, 8 bits of precision.
// Packed layout: uint16_t bf16[n], zero-padded to a multiple of 4 bytes.
#pragma once

#include <cstdint>

#include "loom/compress/codec.h"

namespace loom::compress {

using Bf16 = uint16_t;
static_assert(sizeof(Bf16) == 2);

// Kernels as fp16's (r: floats or bfloat16 bits): _ref is plain scalar; bf16_encode and
// bf16_decode run AVX-512 where the CPU has it (the encoder rounds with BF16's vcvtne2ps2bf16
// where present, in integer operations elsewhere), otherwise the AVX2 kernels; all
// bit-identical to the reference for every input.
bool bf16_encode_ref(const float* g, float* r, size_t n, Bf16* out);
bool bf16_encode_ref(const float* g, uint16_t* r, size_t n, Bf16* out);
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out);
bool bf16_encode(const float* g, uint16_t* r, size_t n, Bf16* out);
bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out);
bool bf16_encode_avx2(const float* g, uint16_t* r, size_t n, Bf16* out);
// The AVX-512 loop a CPU without AVX512_BF16 runs (integer rounding); the AVX2 kernel where the
// CPU has no AVX-512. For the tests, which run it on any CPU.
bool bf16_encode_avx512_no_bf16(const float* g, float* r, size_t n, Bf16* out);
bool bf16_encode_avx512_no_bf16(const float* g, uint16_t* r, size_t n, Bf16* out);
void bf16_decode_ref(const Bf16* in, size_t n, float* out, DecodeMode mode);
void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode);
void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode);

// The residual starts as bfloat16 (ResidualFormat): bf16's rounding error kept to 2^-17 of
// the value, for 4 fewer bytes read and written per element.
class Bf16Codec : public Codec {
 public:
  Bf16Codec() { set_residual_format(ResidualFormat::kBf16); }
  std::string name() const override { return "bf16"; }
  bool supports_bf16_residual() const override { return true; }
  size_t encoded_bytes(size_t n) const override { return round_up4(n * sizeof(Bf16)); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
};

}  // namespace loom::compress
