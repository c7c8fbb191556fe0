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
// Inf. _ref is plain scalar; the others match its packed bytes and residuals bit for bit.
// fp16_encode / fp16_decode run AVX-512 where the CPU has it (fp16_have_avx512()), otherwise
// the F16C/AVX2 kernels, which are also callable directly. The AVX-512 encoder matches the
// reference for every input; the AVX2 one for finite g + r (on NaN it returns false as well,
// but the code it packs for that element differs).
bool fp16_encode_ref(const float* g, float* r, size_t n, Half* out);
bool fp16_encode(const float* g, float* r, size_t n, Half* out);
// stream: non-temporal stores for `out` (bit-identical bytes; see kStreamMinBytes). The
// overload without it streams when out is at least kStreamMinBytes.
bool fp16_encode(const float* g, float* r, size_t n, Half* out, bool stream);
bool fp16_encode_avx2(const float* g, float* r, size_t n, Half* out, bool stream);
void fp16_decode_ref(const Half* in, size_t n, float* out, DecodeMode mode);
void fp16_decode(const Half* in, size_t n, float* out, DecodeMode mode);
void fp16_decode_avx2(const Half* in, size_t n, float* out, DecodeMode mode);
bool fp16_have_avx512();

class Fp16Codec : public Codec {
 public:
  std::string name() const override { return "fp16"; }
  size_t encoded_bytes(size_t n) const override { return round_up4(n * sizeof(Half)); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
};

}  // namespace loom::compress
