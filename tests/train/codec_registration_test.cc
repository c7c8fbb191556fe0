// A codec defined in this one file, registered with a CodecRegistrar and edited nowhere else,
// is a codec to the whole of loom: the registry builds it from its codec.* keys, the cost model
// prices it, `auto` weighs it, the allreduce strategy's options and --help-config name it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "loom/compress/codec_kind.h"
#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/perf/codec_model.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/sync/strategy.h"
#include "loom/train/auto_config.h"

namespace loom {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// 16-bit integers scaled by the bucket's largest magnitude (times `clip`), one float scale
// first, with error feedback.
class TestInt16Codec : public compress::Codec {
 public:
  explicit TestInt16Codec(double clip) : clip_(float(clip)) {}
  std::string name() const override { return "test_int16"; }
  size_t encoded_bytes(size_t n) const override { return 4 + (2 * n + 3) / 4 * 4; }

 protected:
  bool encode_impl(const float* grad, compress::CodecState& state, std::byte* out) const override {
    float* r = state.residual.data();
    float absmax = 0;
    for (size_t i = 0; i < state.n; ++i) {
      r[i] += grad[i];
      if (!std::isfinite(r[i])) return false;
      absmax = std::max(absmax, std::fabs(r[i]));
    }
    const float scale = absmax > 0 ? absmax * clip_ / 32767.0f : 1.0f;
    std::memcpy(out, &scale, 4);
    auto* q = reinterpret_cast<int16_t*>(out + 4);
    for (size_t i = 0; i < state.n; ++i) {
      const float v = std::clamp(std::nearbyint(r[i] / scale), -32767.0f, 32767.0f);
      q[i] = int16_t(v);
      r[i] -= v * scale;
    }
    std::memset(out + 4 + 2 * state.n, 0, encoded_bytes(state.n) - 4 - 2 * state.n);
    return true;
  }
  void decode_impl(const std::byte* in, size_t n, float* out,
                   compress::DecodeMode mode) const override {
    float scale;
    std::memcpy(&scale, in, 4);
    const auto* q = reinterpret_cast<const int16_t*>(in + 4);
    for (size_t i = 0; i < n; ++i)
      out[i] = (mode == compress::DecodeMode::kWrite ? 0.0f : out[i]) + float(q[i]) * scale;
  }

 private:
  float clip_;
};

compress::CodecKind test_int16_kind() {
  compress::CodecKind k;
  k.name = "test_int16";
  k.summary = "16-bit integers scaled per bucket (a test's codec)";
  k.cost.memory_passes = 5;
  k.momentum_correction = true;
  k.keys = {{"codec.test_int16_clip", 1.0, 0.5, 1.0,
             "test_int16: share of the largest magnitude that maps to 32767"}};
  k.make = [](const compress::CodecParams& p) {
    return std::make_unique<TestInt16Codec>(p.real("codec.test_int16_clip"));
  };
  return k;
}

const compress::CodecRegistrar kRegistered(test_int16_kind());

TEST(CodecRegistration, TheRegistryBuildsItFromItsKeys) {
  EXPECT_THAT(compress::codec_names(), Contains("test_int16"));
  std::vector<std::string> keys;
  for (const ConfigKeySpec& s : compress::codec_config_keys()) keys.push_back(s.key);
  EXPECT_THAT(keys, Contains("codec.test_int16_clip"));

  const Config cfg = Config::from_string("codec = \"test_int16\"\n");
  auto codec = compress::make_codec(plan::read_codec_options(cfg));
  ASSERT_EQ(codec->name(), "test_int16");
  std::vector<float> g(1000), back(1000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(float(i));
  compress::CodecState st = codec->make_state(g.size(), "bucket 0");
  std::vector<uint32_t> buf(codec->encoded_bytes(g.size()) / 4);
  std::span<std::byte> out(reinterpret_cast<std::byte*>(buf.data()), buf.size() * 4);
  codec->encode(g, st, out);
  codec->decode(out, back, compress::DecodeMode::kWrite);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(back[i], g[i], 1.0 / 32767) << i;

  // Its key is checked as its record says, and the error names the key.
  const Config bad =
      Config::from_string("codec.name = \"test_int16\"\ncodec.test_int16_clip = 2.0\n");
  try {
    compress::make_codec(plan::read_codec_options(bad));
    FAIL() << "no error for an out-of-range clip";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("codec.test_int16_clip"));
  }
}

TEST(CodecRegistration, TheCostModelPricesItFromItsRecord) {
  const perf::CodecModel m = perf::codec_model("test_int16");
  const double n = double(1 << 20);
  EXPECT_DOUBLE_EQ(m.bits_per_element, 8 * (4 + 2 * n) / n);
  EXPECT_EQ(m.aggregation, perf::Aggregation::kStripeExchange);
  EXPECT_EQ(m.memory_passes, 5);
  EXPECT_TRUE(m.error_feedback);
  EXPECT_THAT(perf::codec_names(), Contains("test_int16"));
}

TEST(CodecRegistration, AutoWeighsItAndTheStrategysOptionsNameIt) {
  EXPECT_THAT(train::auto_candidate_codecs(), Contains("test_int16"));
  bool named = false;
  for (const ConfigKeySpec& s : plan::sync_config_keys())
    if (s.key == "sync.momentum_correction") named = s.doc.find("test_int16") != std::string::npos;
  EXPECT_TRUE(named) << "sync.momentum_correction's help does not name the codec";
}

TEST(CodecRegistration, AnUnknownNameListsItAndANameIsTakenOnce) {
  try {
    compress::codec_kind("no_such_codec");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("test_int16"));
  }
  EXPECT_THROW(compress::CodecRegistrar again(test_int16_kind()), Error);
  // A key whose default is not a number could not be read with a range.
  compress::CodecKind flagged = test_int16_kind();
  flagged.name = "test_int16_flagged";
  flagged.keys.push_back({"codec.test_int16_flag", true, 0, 1, "a flag"});
  EXPECT_THROW(compress::CodecRegistrar with_flag(flagged), Error);
}

// The built-in records agree with the codecs they build.
TEST(CodecRegistration, EveryRecordAgreesWithItsCodec) {
  for (const compress::CodecKind* k : compress::codec_kinds()) {
    auto c = k->make(k->default_params());
    EXPECT_EQ(c->name(), k->name);
    EXPECT_EQ(c->aggregation(), k->aggregation) << k->name;
    EXPECT_EQ(k->lossy, k->name != "fp32") << k->name;
    EXPECT_GT(k->wire_bits_per_element(), 0) << k->name;
    if (!k->auto_candidate) {
      EXPECT_FALSE(k->not_auto_reason.empty()) << k->name;
    }
    for (const compress::CodecKey& s : k->keys) EXPECT_EQ(s.key.rfind("codec.", 0), 0u) << s.key;
  }
}

}  // namespace
}  // namespace loom
