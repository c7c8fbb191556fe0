// fp32 identity: sends g + residual as it is, so the residual ends at zero. Exists so every
// path that takes a codec (collectives, strategies, the bench) can be tested without loss.
// Packed layout: float value[n].
#pragma once

#include "loom/compress/codec.h"

namespace loom::compress {

static_assert(sizeof(float) == 4);

bool identity_encode_ref(const float* g, float* r, size_t n, float* out);
void identity_decode_ref(const float* in, size_t n, float* out, DecodeMode mode);

class IdentityCodec : public Codec {
 public:
  std::string name() const override { return "fp32"; }
  size_t encoded_bytes(size_t n) const override { return n * sizeof(float); }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override;
};

}  // namespace loom::compress
