#include "loom/compress/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "loom/compress/half.h"
#include "loom/core/error.h"

namespace loom::compress {

const char* aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::kStripes:
      return "stripes";
    case Aggregation::kLinear:
      return "linear";
    case Aggregation::kGather:
      return "gather";
  }
  return "?";
}

const char* residual_format_name(ResidualFormat f) {
  return f == ResidualFormat::kF32 ? "fp32" : "bf16";
}

std::vector<float> CodecState::residual_values() const {
  std::vector<float> v(residual_size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = residual_value(i);
  return v;
}

void CodecState::set_residual_values(std::span<const float> values) {
  LOOM_CHECK_EQ(values.size(), residual_size());
  if (residual_format == ResidualFormat::kF32) {
    std::copy(values.begin(), values.end(), residual.begin());
  } else {
    for (size_t i = 0; i < values.size(); ++i) residual_bf16[i] = residual_to_bf16_ref(values[i]);
  }
}

void CodecState::clear_residual() {
  std::fill(residual.begin(), residual.end(), 0.0f);
  std::fill(residual_bf16.begin(), residual_bf16.end(), uint16_t(0));
}

void Codec::set_residual_format(ResidualFormat f) {
  LOOM_CHECK(f == ResidualFormat::kF32 || supports_bf16_residual(),
             "codec {} keeps its residual in fp32 only", name());
  residual_format_ = f;
}

CodecState Codec::make_state(size_t n, const std::string& bucket) const {
  CodecState s;
  s.bucket = bucket;
  s.n = n;
  s.residual_format = residual_format_;
  if (residual_format_ == ResidualFormat::kF32) {
    s.residual.assign(n, 0.0f);
  } else {
    s.residual_bf16.assign(n, uint16_t(0));
  }
  return s;
}

void Codec::encode(std::span<const float> grad, CodecState& state, std::span<std::byte> out) const {
  LOOM_CHECK_EQ(grad.size(), state.n);
  LOOM_CHECK_EQ(state.residual_size(), state.n);
  LOOM_CHECK(state.residual_format == ResidualFormat::kF32 || supports_bf16_residual(),
             "codec {}: {} holds a bf16 residual, which this codec does not keep", name(),
             state.bucket);
  LOOM_CHECK_GE(out.size(), encoded_bytes(grad.size()));
  LOOM_CHECK(reinterpret_cast<uintptr_t>(out.data()) % 4 == 0, "codec {}: output not 4-aligned",
             name());
  // Without error feedback the residual is still the scratch for g + r, but starts at zero.
  if (!error_feedback_) state.clear_residual();
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
