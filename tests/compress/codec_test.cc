// The codec contract, for every codec through the Codec interface, and hand-computed cases.
#include "loom/compress/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compress/codec_test_util.h"
#include "loom/compress/int8_codec.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

using testing::codec_named;
using testing::Packed;
using testing::random_normal;

struct Step {
  std::vector<float> decoded;
  std::vector<float> residual;
};

// One encode + decode of `g` through `codec` with `state`.
std::vector<float> roundtrip(const Codec& codec, CodecState& state, const std::vector<float>& g) {
  size_t bytes = codec.encoded_bytes(g.size());
  Packed buf(bytes);
  codec.encode(g, state, buf.span(bytes));
  std::vector<float> out(g.size(), 0.0f);
  codec.decode(buf.span(bytes), out, DecodeMode::kWrite);
  return out;
}

// A codec name, or "fp16_residual_fp32" / "bf16_residual_fp32": that codec with an fp32
// residual instead of its default bf16 one. (No spaces, '-' or ':' in a parameter: ctest runs
// each test by a gtest filter, where those mean something.)
class EveryCodec : public ::testing::TestWithParam<std::string> {
 protected:
  std::string codec_name() const { return GetParam().substr(0, GetParam().find("_residual_fp32")); }
  std::unique_ptr<Codec> codec() const {
    const bool fp32 = GetParam().find("_residual_fp32") != std::string::npos;
    return codec_named(codec_name(), fp32 ? "codec.residual = \"fp32\"" : "");
  }
};

// Every codec the registry knows, and those that keep a bf16 residual once more with fp32.
std::vector<std::string> every_codec() {
  std::vector<std::string> params;
  for (const std::string& name : codec_names()) {
    params.push_back(name);
    if (codec_named(name, "")->supports_bf16_residual()) params.push_back(name + "_residual_fp32");
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Codecs, EveryCodec, ::testing::ValuesIn(every_codec()));

// decoded + new residual == input + old residual (to float rounding), every step, every length.
TEST_P(EveryCodec, ResidualKeepsExactlyWhatWasNotSent) {
  auto codec = this->codec();
  for (size_t n : {1, 2, 7, 33, 1000, 4097}) {
    CodecState st = codec->make_state(n, "bucket 0");
    for (int step = 0; step < 4; ++step) {
      auto g = random_normal(n, 31 * n + step);
      std::vector<float> before = st.residual_values();
      auto out = roundtrip(*codec, st, g);
      for (size_t i = 0; i < n; ++i) {
        float want = g[i] + before[i];
        // A bf16 residual of fp16 / bf16 rounding is within 2^-17 of the value.
        ASSERT_NEAR(out[i] + st.residual_value(i), want, 1e-5f * (1 + std::fabs(want)))
            << GetParam() << " n=" << n << " i=" << i;
      }
    }
  }
}

// Error feedback: over many steps the sum of what was decoded tracks the sum of inputs; the
// gap is the final residual, which stays bounded instead of growing with the steps.
TEST_P(EveryCodec, ErrorFeedbackSumOfDecodedTracksSumOfInputs) {
  auto codec = this->codec();
  const size_t n = 777;
  const int steps = 200;
  CodecState st = codec->make_state(n, "bucket 1");
  std::vector<double> sum_in(n, 0.0), sum_out(n, 0.0);
  for (int t = 0; t < steps; ++t) {
    auto g = random_normal(n, 1000 + t);
    for (size_t i = 0; i < n; ++i) g[i] = 0.3f + 0.1f * g[i];  // a bias that must get through
    auto out = roundtrip(*codec, st, g);
    for (size_t i = 0; i < n; ++i) sum_in[i] += g[i], sum_out[i] += out[i];
  }
  double max_gap = 0, max_resid = 0;
  for (size_t i = 0; i < n; ++i) {
    max_gap = std::max(max_gap, std::fabs(sum_in[i] - sum_out[i] - st.residual_value(i)));
    max_resid = std::max(max_resid, double(std::fabs(st.residual_value(i))));
  }
  // Telescoping: only float rounding remains (and a bf16 residual's rounding, at most 2^-17 of
  // each step's ~0.3).
  EXPECT_LT(max_gap, 1e-3) << GetParam();
  // Bounded: far below the 60 a codec that dropped the 0.3 bias would accumulate.
  EXPECT_LT(max_resid, codec_name() == "topk" ? 40.0 : 5.0) << GetParam();
  if (codec_name() != "topk") {  // top-k 1% sends each entry only every ~100 steps
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(sum_out[i] / steps, 0.3, 0.05) << i;
  }
}

TEST_P(EveryCodec, AllZeroInputDecodesToZero) {
  auto codec = this->codec();
  for (size_t n : {1, 5, 64, 1001}) {
    CodecState st = codec->make_state(n, "b");
    auto out = roundtrip(*codec, st, std::vector<float>(n, 0.0f));
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(out[i], 0.0f);
      EXPECT_EQ(st.residual_value(i), 0.0f);
    }
  }
}

// The encoders stream the residual beside the (64-byte aligned) gradient; a residual off a
// cache line made every load of one of the two straddle lines.
TEST_P(EveryCodec, ResidualStartsOnACacheLine) {
  auto codec = this->codec();
  for (size_t n : {1, 7, 1000, 4097}) {
    CodecState st = codec->make_state(n, "bucket 0");
    ASSERT_EQ(st.residual_format, codec->residual_format());
    ASSERT_EQ(st.residual_size(), n);
    const void* data = st.residual_format == ResidualFormat::kF32
                           ? static_cast<const void*>(st.residual.data())
                           : static_cast<const void*>(st.residual_bf16.data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u) << "n=" << n;
  }
}

TEST_P(EveryCodec, EmptyBucketIsFine) {
  auto codec = this->codec();
  CodecState st = codec->make_state(0, "b");
  EXPECT_TRUE(roundtrip(*codec, st, {}).empty());
}

TEST_P(EveryCodec, DecodeAccumulatesIntoTheOutput) {
  auto codec = this->codec();
  const size_t n = 300;
  CodecState st = codec->make_state(n, "b");
  auto g = random_normal(n, 5);
  size_t bytes = codec->encoded_bytes(n);
  Packed buf(bytes);
  codec->encode(g, st, buf.span(bytes));
  std::vector<float> w(n, 0.0f), acc(n);
  for (size_t i = 0; i < n; ++i) acc[i] = float(i);
  codec->decode(buf.span(bytes), w, DecodeMode::kWrite);
  codec->decode(buf.span(bytes), acc, DecodeMode::kAccumulate);
  for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(acc[i], float(i) + w[i]);
}

TEST_P(EveryCodec, NanOrInfIsReportedWithTheBucket) {
  auto codec = this->codec();
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CodecState st = codec->make_state(100, "bucket 7");
    std::vector<float> g(100, 1.0f);
    g[42] = bad;
    Packed buf(codec->encoded_bytes(100));
    try {
      codec->encode(g, st, buf.span(codec->encoded_bytes(100)));
      FAIL() << GetParam() << " packed a non-finite value";
    } catch (const NumericError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("bucket 7"), std::string::npos) << what;
      EXPECT_NE(what.find("element 42"), std::string::npos) << what;
      EXPECT_NE(what.find(codec_name()), std::string::npos) << what;
    }
  }
}

TEST_P(EveryCodec, EncodedSizeIsAMultipleOfFourAndNeverAboveFp32) {
  auto codec = this->codec();
  for (size_t n : {1, 2, 3, 31, 1000, 1863690}) {
    EXPECT_EQ(codec->encoded_bytes(n) % 4, 0u) << n;
    if (n >= 64) {
      EXPECT_LE(codec->encoded_bytes(n), 4 * n) << n;
    }
  }
}

// ---- hand-computed cases ----

std::vector<float> once(const std::string& name, std::vector<float> g,
                        std::vector<float>* residual = nullptr, const std::string& cfg = "") {
  auto codec = codec_named(name, cfg);
  CodecState st = codec->make_state(g.size(), "b");
  auto out = roundtrip(*codec, st, g);
  if (residual) *residual = st.residual_values();
  return out;
}

TEST(HandComputed, Fp16) {
  std::vector<float> r;
  auto out = once("fp16", {1.0f, -2.0f, 0.1f, 1e6f, 1e-9f}, &r, "codec.residual = \"fp32\"");
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.0999755859375f);  // 0x2e66
  EXPECT_EQ(r[2], 0.1f - 0.0999755859375f);
  EXPECT_EQ(out[3], 65504.0f);  // saturates; the rest waits in the residual
  EXPECT_EQ(r[3], 1e6f - 65504.0f);
  EXPECT_EQ(out[4], 0.0f);  // below half the smallest subnormal
  EXPECT_EQ(r[4], 1e-9f);
}

// The default bf16 residual: the same codes, the residuals rounded to 8 significant bits.
TEST(HandComputed, Fp16WithBf16Residual) {
  std::vector<float> r;
  auto out = once("fp16", {1.0f, -2.0f, 0.1f, 1e6f, 1e-9f, -1e-39f}, &r);
  EXPECT_EQ(out[2], 0.0999755859375f);
  EXPECT_EQ(r[0], 0.0f);
  // 0.1f - 0x2e66 = 2.44155e-5 = 1.600087 * 2^-16; 1.600087 * 128 = 204.81 -> 205 / 128.
  EXPECT_EQ(r[2], 0x1.9ap-16f);
  // 1e6 - 65504 = 934496 = 1.78241 * 2^19; * 128 = 228.15 -> 228 / 128: 933888.
  EXPECT_EQ(out[3], 65504.0f);
  EXPECT_EQ(r[3], 933888.0f);
  // 1e-9f = 1.0737418 * 2^-30 (bits 0x3089705f): the low half 0x705f < 0x8000 rounds down.
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(r[4], 0x1.12p-30f);
  // A float denormal residual rounds as a bit pattern: -1e-39f is 0x800ae398, whose low half
  // 0xe398 > 0x8000 rounds up to 0x800b: -11 * 2^-133 = -0x1.6p-130.
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_EQ(r[5], -0x1.6p-130f);
}

TEST(HandComputed, Bf16) {
  std::vector<float> r;
  auto out = once("bf16", {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -3.0f}, &r);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);  // tie -> even
  EXPECT_EQ(r[1], 0x1p-8f);
  EXPECT_EQ(out[2], 1.0f + 0x1p-6f);  // tie -> even, upwards
  EXPECT_EQ(out[3], -3.0f);
}

TEST(HandComputed, Int8DynamicTree) {
  const auto& t = int8_dynamic_tree_table();
  EXPECT_EQ(t[0x00], 0.0f);
  EXPECT_EQ(t[0x7f], 1.0f);  // e = 0, j = 63: the block maximum, exact
  EXPECT_EQ(t[0xff], -1.0f);
  EXPECT_FLOAT_EQ(t[64], 0.1f + 0.9f / 64);  // e = 0, j = 0
  EXPECT_FLOAT_EQ(t[63], 0.1f);              // e = 1, j = 31: top of the next level
  EXPECT_FLOAT_EQ(t[1], 1e-6f);              // e = 6: the smallest magnitude
  for (int i = 1; i < 127; ++i) EXPECT_LT(t[i], t[i + 1]) << i;  // sorted, no duplicates
  std::vector<float> r;
  // absmax 2: 0.5 / 2 = 0.25 -> u = (0.25 - 0.1) * 64 / 0.9 = 10.67 -> q = 11 -> mi = 74,
  // value 0.1 + 0.9 * 11 / 64 = 0.2546875, times 2.
  auto out = once("int8", {2.0f, -2.0f, 0.5f, 0.0f, 0.002f}, &r);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_FLOAT_EQ(out[2], 2 * 0.2546875f);
  EXPECT_EQ(out[3], 0.0f);
  // 0.002 / 2 = 1e-3: level e = 3 (top exactly 1e-3) -> sent as 1e-3 * 2.
  EXPECT_FLOAT_EQ(out[4], 0.002f);
  EXPECT_FLOAT_EQ(r[2], 0.5f - 2 * 0.2546875f);
}

TEST(HandComputed, Int8AllNegativeAndBlocks) {
  // block 8: the second block has its own absmax.
  std::vector<float> g = {-1, -2, -3, -4, -5, -6, -7, -8, -0.5f, -0.25f};
  auto out = once("int8", g, nullptr, "codec.int8_block = 8");
  EXPECT_EQ(out[7], -8.0f);
  EXPECT_EQ(out[8], -0.5f);
  // 0.25 / 0.5 = 0.5: u = 0.4 * 64 / 0.9 = 28.4 -> q = 28 -> 0.1 + 0.9 * 28 / 64 = 0.49375.
  EXPECT_FLOAT_EQ(out[9], -0.5f * 0.49375f);
}

TEST(HandComputed, OnebitMeansOfEachSide) {
  std::vector<float> r;
  // Negative side {-1, -3}: mean -2; non-negative side {0, 2, 4}: mean 2. sign(0) = +1.
  auto out = once("onebit", {-1, 2, -3, 4, 0}, &r);
  EXPECT_EQ(out, (std::vector<float>{-2, 2, -2, 2, 2}));
  EXPECT_EQ(r, (std::vector<float>{1, 0, -1, 2, -2}));
  // All negative: one level, the mean; the non-negative level is unused.
  out = once("onebit", {-1, -2, -3, -4}, &r);
  EXPECT_EQ(out, (std::vector<float>{-2.5f, -2.5f, -2.5f, -2.5f}));
  EXPECT_EQ(r, (std::vector<float>{1.5f, 0.5f, -0.5f, -1.5f}));
  // A single element is sent exactly.
  out = once("onebit", {3.0f}, &r);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(r[0], 0.0f);
}

TEST(HandComputed, OnebitOddLengthAndColumns) {
  // 33 elements, columns of 32: element 32 is its own column and is sent exactly.
  std::vector<float> g(33);
  for (size_t i = 0; i < 32; ++i) g[i] = i % 2 ? float(i) : -1.0f;
  g[32] = -7.0f;
  auto out = once("onebit", g, nullptr, "codec.onebit_column = 32");
  // odd i: 1, 3, ..., 31: mean 16; even: -1.
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(out[i], i % 2 ? 16.0f : -1.0f) << i;
  EXPECT_EQ(out[32], -7.0f);
}

TEST(HandComputed, TopkLargestMagnitudesTiesToLowerIndex) {
  std::vector<float> r;
  auto out = once("topk", {0.1f, -5, 3, 0.2f, 5}, &r, "codec.topk_fraction = 0.4");  // k = 2
  EXPECT_EQ(out, (std::vector<float>{0, -5, 0, 0, 5}));
  EXPECT_EQ(r, (std::vector<float>{0.1f, 0, 3, 0.2f, 0}));
  out = once("topk", {1, -1, 1, -1}, &r, "codec.topk_fraction = 0.5");
  EXPECT_EQ(out, (std::vector<float>{1, -1, 0, 0}));
}

TEST(HandComputed, PowersgdRankOneIsExactOnARankOneMatrix) {
  // M = u v^T (3 x 4, cols given) is rank 1: one power step recovers it (up to rounding).
  std::vector<float> g;
  float u[3] = {1, -2, 3}, v[4] = {0.5f, 1, -1, 2};
  for (float a : u)
    for (float b : v) g.push_back(a * b);
  std::vector<float> r;
  auto out = once("powersgd", g, &r, "codec.powersgd_rank = 1\ncodec.powersgd_cols = 4");
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(out[i], g[i], 1e-5f) << i;
    EXPECT_NEAR(r[i], 0.0f, 1e-5f) << i;
  }
}

TEST(ErrorFeedback, OnebitWithoutItLosesTheSmallComponents) {
  // All entries positive, one large: every step the 1-bit quantiser sends all of them as their
  // mean (0.0255); error feedback makes the large one get through over the steps.
  const size_t n = 64;
  std::vector<float> g(n, 0.01f);
  g[0] = 1.0f;
  for (bool ef : {true, false}) {
    auto codec = codec_named("onebit", ef ? "" : "codec.error_feedback = false");
    CodecState st = codec->make_state(n, "b");
    std::vector<double> sum(n, 0.0);
    const int steps = 100;
    for (int t = 0; t < steps; ++t) {
      auto out = roundtrip(*codec, st, g);
      for (size_t i = 0; i < n; ++i) sum[i] += out[i];
    }
    double err = 0;
    for (size_t i = 0; i < n; ++i) err = std::max(err, std::fabs(sum[i] / steps - g[i]));
    if (ef) {
      EXPECT_LT(err, 0.05) << "with error feedback";
    } else {
      EXPECT_GT(err, 0.9) << "without error feedback";
    }
  }
}

}  // namespace
}  // namespace loom::compress
