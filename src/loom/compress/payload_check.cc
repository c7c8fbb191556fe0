// Codec::check_payload and decode_checked: the checks a payload from outside loom gets before
// any codec reads it (codec.h). Each codec's own invariants are its check_payload_impl.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/core/error.h"

namespace loom::compress {

void payload_error(const std::string& what, const std::string& codec, size_t n,
                   const std::string& problem) {
  throw InputError(fmt::format("{}: not a {} payload of {} elements: {}", what, codec, n, problem));
}

bool zero_bytes(const std::byte* in, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (in[i] != std::byte{0}) return false;
  return true;
}

void Codec::check_payload_impl(const std::byte*, size_t, const std::string&) const {}

void Codec::check_payload(std::span<const std::byte> in, size_t n, const std::string& what) const {
  const size_t bytes = encoded_bytes(n);
  // Exactly, not at least: a longer payload is the encoding of another n (or of nothing).
  if (in.size() != bytes)
    payload_error(
        what, name(), n,
        fmt::format("{} bytes, where the encoding of {} elements takes {}", in.size(), n, bytes));
  if (bytes == 0) return;
  if (reinterpret_cast<uintptr_t>(in.data()) % 4 == 0) {
    check_payload_impl(in.data(), n, what);
    return;
  }
  std::vector<uint32_t> aligned((bytes + 3) / 4);
  std::memcpy(aligned.data(), in.data(), bytes);
  check_payload_impl(reinterpret_cast<const std::byte*>(aligned.data()), n, what);
}

void Codec::decode_checked(std::span<const std::byte> in, std::span<float> out, DecodeMode mode,
                           const std::string& what) const {
  const size_t n = out.size();
  check_payload(in, n, what);
  std::vector<uint32_t> aligned;
  if (reinterpret_cast<uintptr_t>(in.data()) % 4 != 0) {
    aligned.resize((in.size() + 3) / 4);
    std::memcpy(aligned.data(), in.data(), in.size());
    in = std::span<const std::byte>(reinterpret_cast<const std::byte*>(aligned.data()), in.size());
  }
  // Decoded into a scratch first, so a payload that fails leaves `out` as it was.
  std::vector<float> decoded(n);
  decode(in, decoded, DecodeMode::kWrite);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(decoded[i]))
      payload_error(
          what, name(), n,
          fmt::format("element {} decodes to {}", i, std::isnan(decoded[i]) ? "NaN" : "Inf"));
  }
  if (mode == DecodeMode::kWrite) {
    std::copy(decoded.begin(), decoded.end(), out.begin());
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += decoded[i];
  }
}

}  // namespace loom::compress
