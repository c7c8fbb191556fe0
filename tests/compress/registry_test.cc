#include "loom/compress/registry.h"

#include <gtest/gtest.h>

#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

// The message of the ConfigError that building `toml` throws ("" if none).
std::string error_of(const std::string& toml) {
  try {
    make_codec(Config::from_string(toml, "cfg.toml"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, EveryNameBuildsItsCodec) {
  for (const auto& name : codec_names()) {
    auto c = make_codec(Config::from_string("codec = \"" + name + "\""));
    EXPECT_EQ(c->name(), name);
    EXPECT_TRUE(c->error_feedback());
  }
  EXPECT_EQ(make_codec(Config())->name(), "fp32");
}

TEST(Registry, ParametersReachTheCodec) {
  auto c = make_codec(Config::from_string("codec.name = \"int8\"\ncodec.int8_block = 64"));
  EXPECT_EQ(dynamic_cast<Int8Codec&>(*c).block(), 64u);
  c =
      make_codec(Config::from_string("codec.name = \"onebit\"\ncodec.onebit_column = 96\n"
                                     "codec.error_feedback = false"));
  EXPECT_EQ(dynamic_cast<OnebitCodec&>(*c).column(), 96u);
  EXPECT_FALSE(c->error_feedback());
}

TEST(Registry, BadInputNamesTheKey) {
  struct Case {
    std::string toml, key, words;
  } cases[] = {
      {"codec = \"zip\"", "'codec'", "zip"},
      {"codec.name = \"zip\"", "'codec.name'", "zip"},
      {"codec.name = \"int8\"\ncodec.int8_block = 100", "codec.int8_block", "power of two"},
      {"codec.name = \"int8\"\ncodec.int8_block = 4", "codec.int8_block", "out of range"},
      {"codec.name = \"onebit\"\ncodec.onebit_column = 48", "codec.onebit_column",
       "multiple of 32"},
      {"codec.name = \"topk\"\ncodec.topk_fraction = 0.0", "codec.topk_fraction", "out of range"},
      {"codec.name = \"topk\"\ncodec.topk_fraction = -0.5", "codec.topk_fraction", "out of range"},
      {"codec.name = \"topk\"\ncodec.topk_fraction = 1.5", "codec.topk_fraction", "out of range"},
      {"codec.name = \"powersgd\"\ncodec.powersgd_rank = 0", "codec.powersgd_rank", "out of range"},
      {"codec.name = \"fp16\"\ncodec.error_feedback = 3", "codec.error_feedback", "boolean"},
  };
  for (const auto& c : cases) {
    std::string what = error_of(c.toml);
    EXPECT_NE(what.find(c.key), std::string::npos) << c.toml << " -> " << what;
    EXPECT_NE(what.find(c.words), std::string::npos) << c.toml << " -> " << what;
    EXPECT_NE(what.find("cfg.toml"), std::string::npos) << c.toml << " -> " << what;
  }
}

// fp16 and bf16 keep a bf16 residual unless told fp32; the others keep fp32 and refuse bf16,
// naming the key.
TEST(Registry, ResidualFormat) {
  for (const auto& name : codec_names()) {
    auto c = make_codec(Config::from_string("codec = \"" + name + "\""));
    const bool half = name == "fp16" || name == "bf16";
    EXPECT_EQ(c->residual_format(), half ? ResidualFormat::kBf16 : ResidualFormat::kF32) << name;
    EXPECT_EQ(c->make_state(10, "b").residual_format, c->residual_format()) << name;
    c = make_codec(Config::from_string("codec.name = \"" + name + "\"\ncodec.residual = \"fp32\""));
    EXPECT_EQ(c->residual_format(), ResidualFormat::kF32) << name;
    const std::string err = error_of("codec.name = \"" + name + "\"\ncodec.residual = \"bf16\"");
    if (half) {
      EXPECT_EQ(err, "") << name;
    } else {
      EXPECT_NE(err.find("codec.residual"), std::string::npos) << err;
      EXPECT_NE(err.find("fp32 only"), std::string::npos) << err;
    }
  }
  const std::string err = error_of("codec.name = \"fp16\"\ncodec.residual = \"fp8\"");
  EXPECT_NE(err.find("codec.residual"), std::string::npos) << err;
}

TEST(Registry, BareCodecKeyAndCodecNameTogetherIsAnError) {
  Config cfg;
  cfg.set("codec", std::string("fp16"), "--set");
  cfg.set("codec.name", std::string("int8"), "cfg.toml:3");
  try {
    make_codec(cfg);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.toml:3: key 'codec.name'"), std::string::npos)
        << e.what();
  }
}

TEST(Registry, ConfigKeysCoverEveryParameter) {
  auto keys = codec_config_keys();
  Config cfg = Config::from_string(
      "codec.name = \"topk\"\ncodec.topk_fraction = 0.1\ncodec.int8_block = 64\n"
      "codec.onebit_column = 64\ncodec.powersgd_rank = 2\ncodec.powersgd_cols = 8\n"
      "codec.error_feedback = true\ncodec.seed = 3");
  EXPECT_NO_THROW(cfg.check_known(keys));
}

TEST(Registry, WireRatiosOfTheDefaultMlpGradient) {
  const size_t n = 1863690;  // the default MLP's gradient
  auto ratio = [&](const std::string& name) {
    return make_codec(Config::from_string("codec = \"" + name + "\""))->wire_ratio(n);
  };
  EXPECT_EQ(ratio("fp32"), 1.0);
  EXPECT_EQ(ratio("fp16"), 0.5);
  EXPECT_EQ(ratio("bf16"), 0.5);
  EXPECT_LE(ratio("int8"), 1 / 3.9);
  EXPECT_LE(ratio("onebit"), 1 / 25.0);
  EXPECT_LE(ratio("topk"), 1 / 49.0);
}

}  // namespace
}  // namespace loom::compress
