#include "loom/compress/identity_codec.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "loom/compress/half.h"

namespace loom::compress {

// Plain loops: the compiler vectorises them (integer OR for the finiteness flag).
bool identity_encode_ref(const float* g, float* r, size_t n, float* out) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    float s = g[i] + r[i];
    bad |= uint32_t(!is_finite_bits(s));
    out[i] = s;
    r[i] = 0.0f;
  }
  return bad == 0;
}

void identity_decode_ref(const float* in, size_t n, float* out, DecodeMode mode) {
  if (mode == DecodeMode::kWrite) {
    // An empty bucket may come with null pointers, which memcpy must not get even for 0 bytes.
    if (n > 0) std::memcpy(out, in, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += in[i];
  }
}

bool IdentityCodec::encode_impl(const float* grad, CodecState& state, std::byte* out) const {
  return identity_encode_ref(grad, state.residual.data(), state.n, reinterpret_cast<float*>(out));
}

void IdentityCodec::decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const {
  identity_decode_ref(reinterpret_cast<const float*>(in), n, out, mode);
}

// encode() refuses NaN and Inf, so a payload holds finite floats only.
void IdentityCodec::check_payload_impl(const std::byte* in, size_t n,
                                       const std::string& what) const {
  const auto* f = reinterpret_cast<const float*>(in);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(f[i]))
      payload_error(what, name(), n, fmt::format("element {} is {}", i, f[i]));
  }
}

}  // namespace loom::compress
