#include "loom/compress/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "loom/core/error.h"

namespace loom::compress {

CodecState Codec::make_state(size_t n, const std::string& bucket) const {
  CodecState s;
  s.bucket = bucket;
  s.n = n;
  s.residual.assign(n, 0.0f);
  return s;
}

void Codec::encode(std::span<const float> grad, CodecState& state, std::span<std::byte> out) const {
  LOOM_CHECK_EQ(grad.size(), state.n);
  LOOM_CHECK_EQ(state.residual.size(), state.n);
  LOOM_CHECK_GE(out.size(), encoded_bytes(grad.size()));
  LOOM_CHECK(reinterpret_cast<uintptr_t>(out.data()) % 4 == 0, "codec {}: output not 4-aligned",
             name());
  // Without error feedback the residual is still the scratch for g + r, but starts at zero.
  if (!error_feedback_) std::fill(state.residual.begin(), state.residual.end(), 0.0f);
  if (!encode_impl(grad.data(), state, out.data())) throw_non_finite(name(), state, grad);
  ++state.steps;
}

void Codec::decode(std::span<const std::byte> in, std::span<float> out, DecodeMode mode) const {
  LOOM_CHECK_GE(in.size(), encoded_bytes(out.size()));
  LOOM_CHECK(reinterpret_cast<uintptr_t>(in.data()) % 4 == 0, "codec {}: input not 4-aligned",
             name());
  decode_impl(in.data(), out.size(), out.data(), mode);
}

void throw_non_finite(const std::string& codec, const CodecState& state,
                      std::span<const float> grad) {
  for (size_t i = 0; i < grad.size(); ++i) {
    if (!std::isfinite(grad[i])) {
      throw NumericError(fmt::format("codec {}: {} in {} at element {} of {}: not packed", codec,
                                     std::isnan(grad[i]) ? "NaN" : "Inf",
                                     state.bucket.empty() ? "a bucket" : state.bucket, i,
                                     grad.size()));
    }
  }
  throw NumericError(
      fmt::format("codec {}: gradient + residual overflowed to Inf in {} ({} elements): not packed",
                  codec, state.bucket.empty() ? "a bucket" : state.bucket, grad.size()));
}

}  // namespace loom::compress
