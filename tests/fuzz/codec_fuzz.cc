// libFuzzer harness: one codec's decode_checked() on arbitrary bytes, built once per codec
// (LOOM_FUZZ_CODEC names it; tests/fuzz/CMakeLists.txt). Input: byte 0 picks the codec's
// parameters, bytes 1-2 are n (little-endian), the rest is the payload. Whatever the bytes, the
// decode must end in InputError, leaving the output untouched, or in n finite values; any
// other exception, a crash or a sanitizer report is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "loom/compress/bf16_codec.h"
#include "loom/compress/fp16_codec.h"
#include "loom/compress/identity_codec.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/powersgd_codec.h"
#include "loom/compress/topk_codec.h"
#include "loom/core/error.h"

namespace {

using namespace loom::compress;

// The codec under test with the parameters byte p selects (each a value the registry accepts).
std::unique_ptr<Codec> make(uint8_t p) {
  const std::string_view codec = LOOM_FUZZ_CODEC;
  if (codec == "topk") {
    constexpr double kFractions[4] = {0.01, 0.1, 0.5, 1.0};
    return std::make_unique<TopkCodec>(kFractions[p & 3]);
  }
  if (codec == "int8") {
    constexpr size_t kBlocks[4] = {8, 64, 512, 32};
    return std::make_unique<Int8Codec>(kBlocks[p & 3]);
  }
  if (codec == "onebit") {
    constexpr size_t kColumns[4] = {32, 64, 512, 96};
    return std::make_unique<OnebitCodec>(kColumns[p & 3]);
  }
  if (codec == "powersgd") {
    constexpr size_t kRanks[4] = {1, 2, 4, 3};
    constexpr size_t kCols[4] = {0, 1, 7, 16};
    return std::make_unique<PowerSgdCodec>(kRanks[p & 3], kCols[(p >> 2) & 3]);
  }
  if (codec == "fp16") return std::make_unique<Fp16Codec>();
  if (codec == "bf16") return std::make_unique<Bf16Codec>();
  return std::make_unique<IdentityCodec>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::unique_ptr<Codec> codec = make(data[0]);
  const size_t n = size_t(data[1]) | size_t(data[2]) << 8;
  // Exactly the payload's bytes in a buffer of their own, so ASan sees any read past them.
  std::vector<std::byte> payload(size - 3);
  for (size_t i = 3; i < size; ++i) payload[i - 3] = std::byte(data[i]);
  std::vector<float> out(n, 7.0f);
  try {
    codec->decode_checked(payload, out,
                          (data[0] & 0x80) ? DecodeMode::kAccumulate : DecodeMode::kWrite,
                          "fuzz payload");
  } catch (const loom::InputError&) {
    for (float v : out)
      if (v != 7.0f) std::abort();  // a refused payload must leave the output as it was
    return 0;
  }
  for (float v : out)
    if (!std::isfinite(v)) std::abort();
  return 0;
}
