// Codec::check_payload and decode_checked (codec.h): a payload from outside loom is checked
// against its element count and the codec's invariants before any codec reads it. Every codec's
// own encodings pass; each kind of damage is an InputError naming the payload and the problem,
// and leaves the output as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "codec_test_util.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

using testing::codec_named;
using testing::random_normal;

// One codec's encoding of n values, as bytes a caller could hand back.
std::vector<std::byte> encoded(const Codec& c, size_t n, uint64_t seed = 1) {
  const std::vector<float> g = random_normal(n, seed);
  CodecState st = c.make_state(n, "test");
  testing::Packed out(c.encoded_bytes(n));
  c.encode(g, st, out.span(c.encoded_bytes(n)));
  const std::span<std::byte> s = out.span(c.encoded_bytes(n));
  return {s.begin(), s.end()};
}

// decode_checked must throw InputError whose message holds `needle` and leave `out` alone.
void expect_refused(const Codec& c, const std::vector<std::byte>& payload, size_t n,
                    const std::string& needle) {
  std::vector<float> out(n, 3.0f);
  try {
    c.decode_checked(payload, out, DecodeMode::kWrite, "test payload");
    FAIL() << c.name() << ": accepted a payload that should fail with \"" << needle << "\"";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test payload"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  for (float v : out) ASSERT_EQ(v, 3.0f) << c.name() << ": a refused payload changed the output";
}

template <class T>
void put(std::vector<std::byte>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

TEST(PayloadCheck, EveryCodecsOwnEncodingDecodesAsDecodeDoes) {
  for (const std::string& name : codec_names()) {
    const auto c = codec_named(name);
    for (size_t n : {size_t(0), size_t(1), size_t(37), size_t(1000)}) {
      const std::vector<std::byte> p = encoded(*c, n);
      std::vector<float> want(n), got(n), acc(n, 1.0f);
      c->decode(p, want, DecodeMode::kWrite);
      c->decode_checked(p, got, DecodeMode::kWrite, "payload");
      EXPECT_EQ(got, want) << name << " n=" << n;
      c->decode_checked(p, acc, DecodeMode::kAccumulate, "payload");
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(acc[i], 1.0f + want[i]) << name;
    }
  }
}

TEST(PayloadCheck, AnotherSizeThanTheEncodingOfNIsRefused) {
  for (const std::string& name : codec_names()) {
    const auto c = codec_named(name);
    std::vector<std::byte> p = encoded(*c, 1000);
    // The same bytes read as a shorter output (top-k decoding into too few values), or cut, or
    // longer.
    expect_refused(*c, p, 100, "bytes, where the encoding of 100 elements takes");
    std::vector<std::byte> longer = p;
    longer.resize(p.size() + 4);
    expect_refused(*c, longer, 1000, "bytes, where");
    p.resize(p.size() - 4);
    expect_refused(*c, p, 1000, "bytes, where");
  }
}

TEST(PayloadCheck, UnalignedPayloadsAreRead) {
  const auto c = codec_named("int8");
  const std::vector<std::byte> p = encoded(*c, 100);
  std::vector<std::byte> shifted(p.size() + 1);
  std::memcpy(shifted.data() + 1, p.data(), p.size());
  std::vector<float> want(100), got(100);
  c->decode(p, want, DecodeMode::kWrite);
  c->decode_checked(std::span<const std::byte>(shifted).subspan(1), got, DecodeMode::kWrite, "p");
  EXPECT_EQ(got, want);
}

TEST(PayloadCheck, TopkEntriesMustBeAscendingIndicesBelowNWithFiniteValues) {
  const auto c = codec_named("topk", "codec.topk_fraction = 0.1");
  const size_t n = 100;  // k = 10 entries of (uint32 index, float value)
  const std::vector<std::byte> good = encoded(*c, n);
  std::vector<std::byte> p = good;
  put<uint32_t>(p, 8 * 9, 100);  // the last entry's index = n
  expect_refused(*c, p, n, "entry 9 has index 100");
  p = good;
  put<uint32_t>(p, 8 * 9, 0xffffffffu);
  expect_refused(*c, p, n, "entry 9 has index 4294967295");
  p = good;
  uint32_t first;
  std::memcpy(&first, p.data(), 4);
  put<uint32_t>(p, 8, first);  // entry 1 repeats entry 0's index
  expect_refused(*c, p, n, "(indices ascend)");
  p = good;
  put<float>(p, 4, std::numeric_limits<float>::quiet_NaN());
  expect_refused(*c, p, n, "entry 0");
  p = good;
  put<float>(p, 12, std::numeric_limits<float>::infinity());
  expect_refused(*c, p, n, "entry 1");
}

TEST(PayloadCheck, Int8AbsmaxIsAFiniteMagnitudeAndThePaddingZero) {
  const auto c = codec_named("int8", "codec.int8_block = 64");
  const size_t n = 130;  // 3 blocks: 12 bytes of absmax, 130 codes, 2 bytes of padding
  const std::vector<std::byte> good = encoded(*c, n);
  ASSERT_EQ(good.size(), 144u);
  std::vector<std::byte> p = good;
  put<float>(p, 4, std::numeric_limits<float>::quiet_NaN());
  expect_refused(*c, p, n, "block 1 has absmax nan");
  p = good;
  put<float>(p, 8, -1.0f);
  expect_refused(*c, p, n, "block 2 has absmax -1");
  p = good;
  put<float>(p, 0, std::numeric_limits<float>::infinity());
  expect_refused(*c, p, n, "block 0 has absmax inf");
  p = good;
  p[143] = std::byte{1};
  expect_refused(*c, p, n, "padding");
}

TEST(PayloadCheck, OnebitLevelsAreSignedMeansAndUnusedSignBitsZero) {
  const auto c = codec_named("onebit", "codec.onebit_column = 32");
  const size_t n = 40;  // 2 columns of levels (16 bytes), 2 sign words
  const std::vector<std::byte> good = encoded(*c, n);
  ASSERT_EQ(good.size(), 24u);
  std::vector<std::byte> p = good;
  put<float>(p, 0, 0.5f);  // column 0's negative level > 0
  expect_refused(*c, p, n, "column 0 has levels");
  p = good;
  put<float>(p, 12, std::numeric_limits<float>::quiet_NaN());
  expect_refused(*c, p, n, "column 1 has levels");
  p = good;
  put<float>(p, 12, -2.0f);  // column 1's non-negative level < 0
  expect_refused(*c, p, n, "column 1 has levels");
  p = good;
  put<uint32_t>(p, 20, 1u << 9);  // element 41 of 40
  expect_refused(*c, p, n, "sign bits past the last element");
}

TEST(PayloadCheck, PowersgdFactorsAndTheirProductsAreFinite) {
  const auto c = codec_named("powersgd", "codec.powersgd_rank = 1");
  const size_t n = 16;  // 4 x 4, rank 1: P 4 floats, Q 4 floats
  const std::vector<std::byte> good = encoded(*c, n);
  ASSERT_EQ(good.size(), 32u);
  std::vector<std::byte> p = good;
  put<float>(p, 4 * 5, std::numeric_limits<float>::quiet_NaN());
  expect_refused(*c, p, n, "Q factor element 1 is nan");
  p = good;
  put<float>(p, 0, std::numeric_limits<float>::infinity());
  expect_refused(*c, p, n, "P factor element 0 is inf");
  // Finite factors whose product overflows.
  for (size_t i = 0; i < 8; ++i) put<float>(p, 4 * i, 3e38f);
  expect_refused(*c, p, n, "decodes to Inf");
}

TEST(PayloadCheck, SixteenBitCodesAreFiniteAndThePaddingZero) {
  for (const char* name : {"fp16", "bf16"}) {
    const auto c = codec_named(name);
    const bool fp16 = std::string(name) == "fp16";
    const size_t n = 3;  // 6 bytes of codes, 2 of padding
    const std::vector<std::byte> good = encoded(*c, n);
    std::vector<std::byte> p = good;
    put<uint16_t>(p, 2, fp16 ? 0x7e00 : 0x7fc0);  // NaN
    expect_refused(*c, p, n, "element 1 has code");
    p = good;
    put<uint16_t>(p, 4, fp16 ? 0xfc00 : 0xff80);  // -Inf
    expect_refused(*c, p, n, "which is Inf");
    p = good;
    p[7] = std::byte{0x40};
    expect_refused(*c, p, n, "padding");
  }
}

TEST(PayloadCheck, Fp32ValuesAreFinite) {
  const auto c = codec_named("fp32");
  std::vector<std::byte> p = encoded(*c, 5);
  put<float>(p, 8, -std::numeric_limits<float>::infinity());
  expect_refused(*c, p, 5, "element 2 is -inf");
}

}  // namespace
}  // namespace loom::compress
