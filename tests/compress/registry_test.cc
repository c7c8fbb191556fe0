#include "loom/compress/registry.h"

#include <gtest/gtest.h>

#include "loom/compress/int8_codec.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

// A codec's options, built without a config: its record's defaults, then a parameter changed.
TEST(Registry, OptionsBuildTheCodecWithoutAConfig) {
  CodecOptions o;
  o.name = "int8";
  o.params = codec_kind("int8").default_params();
  EXPECT_EQ(dynamic_cast<Int8Codec&>(*make_codec(o)).block(), size_t(kInt8DefaultBlock));
  o.params.set("codec.int8_block", int64_t(64), "test");
  o.error_feedback = false;
  auto c = make_codec(o);
  EXPECT_EQ(dynamic_cast<Int8Codec&>(*c).block(), 64u);
  EXPECT_FALSE(c->error_feedback());
  // The codec's own check names where the value came from.
  o.params.set("codec.int8_block", int64_t(100), "caller.toml:7");
  try {
    make_codec(o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("caller.toml:7: key 'codec.int8_block'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Registry, EveryRecordsDefaultsBuildIt) {
  for (const std::string& name : codec_names()) EXPECT_EQ(make_codec(name)->name(), name);
}

TEST(Registry, WireRatiosOfTheDefaultMlpGradient) {
  const size_t n = 1863690;  // the default MLP's gradient
  auto ratio = [&](const std::string& name) { return make_codec(name)->wire_ratio(n); };
  EXPECT_EQ(ratio("fp32"), 1.0);
  EXPECT_EQ(ratio("fp16"), 0.5);
  EXPECT_EQ(ratio("bf16"), 0.5);
  EXPECT_LE(ratio("int8"), 1 / 3.9);
  EXPECT_LE(ratio("onebit"), 1 / 25.0);
  EXPECT_LE(ratio("topk"), 1 / 49.0);
}

}  // namespace
}  // namespace loom::compress
