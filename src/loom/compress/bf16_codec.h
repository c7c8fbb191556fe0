// bf16: the top 16 bits of each float, round to nearest even; magnitudes beyond the largest
// finite bfloat16 saturate. 2 bytes per element; same range as fp32, 8 bits of precision.
// Packed layout: uint16_t bf16[n], zero-padded to a multiple of 4 bytes.
#pragma once

#include <cstdint>

#include "loom/compress/codec.h"

namespace loom::compress {

using Bf16 = uint16_t;
static_assert(sizeof(Bf16) == 2);

// Kernels as fp16's: _ref is plain scalar; bf16_encode / bf16_decode run AVX-512 where the CPU
// has it (bf16_have_avx512()), otherwise the AVX2 kernels, bit-identical to the reference (the
// AVX2 encoder for finite g + r only: on NaN it returns false too, with a different code).
bool bf16_encode_ref(const float* g, float* r, size_t n, Bf16* out);
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out);
// stream: non-temporal stores for `out` (bit-identical bytes; see kStreamMinBytes). The
// overload without it streams when out is at least kStreamMinBytes.
bool bf16_encode(const float* g, float* r, size_t n, Bf16* out, bool stream);
bool bf16_encode_avx2(const float* g, float* r, size_t n, Bf16* out, bool stream);
void bf16_decode_ref(const Bf16* in, size_t n, float* out, DecodeMode mode);
void bf16_decode(const Bf16* in, size_t n, float* out, DecodeMode mode);
void bf16_decode_avx2(const Bf16* in, size_t n, float* out, DecodeMode mode);
bool bf16_have_avx512();

class Bf16Codec : public Codec {
 public:
  std::string name() const override { return "bf16"; }
  size_t encoded_bytes(size_t n) const override { return round_up4(n * sizeof(Bf16)); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
};

}  // namespace loom::compress
