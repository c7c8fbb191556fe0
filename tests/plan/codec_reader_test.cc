// A run's codec keys read into CodecOptions and built: names, parameters with their ranges,
// the shared settings, and errors that name the key and line.

#include "loom/plan/codec_reader.h"

#include <gtest/gtest.h>

#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/registry.h"
#include "loom/core/error.h"

namespace loom::plan {
namespace {

using compress::codec_names;
using compress::Int8Codec;
using compress::OnebitCodec;
using compress::ResidualFormat;

std::unique_ptr<compress::Codec> make_codec(const Config& cfg) {
  return compress::make_codec(read_codec_options(cfg));
}

// The message of the ConfigError that building `toml` throws ("" if none).
std::string error_of(const std::string& toml) {
  try {
    make_codec(Config::from_string(toml, "cfg.toml"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CodecReader, EveryNameBuildsItsCodec) {
  for (const auto& name : codec_names()) {
    auto c = make_codec(Config::from_string("codec = \"" + name + "\""));
    EXPECT_EQ(c->name(), name);
    EXPECT_TRUE(c->error_feedback());
  }
  EXPECT_EQ(make_codec(Config())->name(), "fp32");
}

TEST(CodecReader, ParametersReachTheCodec) {
  auto c = make_codec(Config::from_string("codec.name = \"int8\"\ncodec.int8_block = 64"));
  EXPECT_EQ(dynamic_cast<Int8Codec&>(*c).block(), 64u);
  c =
      make_codec(Config::from_string("codec.name = \"onebit\"\ncodec.onebit_column = 96\n"
                                     "codec.error_feedback = false"));
  EXPECT_EQ(dynamic_cast<OnebitCodec&>(*c).column(), 96u);
  EXPECT_FALSE(c->error_feedback());
}

TEST(CodecReader, BadInputNamesTheKey) {
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
TEST(CodecReader, ResidualFormat) {
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

TEST(CodecReader, BareCodecKeyAndCodecNameTogetherIsAnError) {
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

TEST(CodecReader, ConfigKeysCoverEveryParameter) {
  auto keys = compress::codec_config_keys();
  Config cfg = Config::from_string(
      "codec.name = \"topk\"\ncodec.topk_fraction = 0.1\ncodec.int8_block = 64\n"
      "codec.onebit_column = 64\ncodec.powersgd_rank = 2\ncodec.powersgd_cols = 8\n"
      "codec.error_feedback = true\ncodec.seed = 3");
  EXPECT_NO_THROW(cfg.check_known(keys));
}

// Another codec's parameter set away from its default means nothing to this run: refused,
// naming the key and the codec chosen; at its default it is let through.
TEST(CodecReader, AnotherCodecsParameterIsRefused) {
  const Config cfg =
      Config::from_string("codec.name = \"int8\"\ncodec.topk_fraction = 0.1", "cfg.toml");
  try {
    refuse_other_codec_keys(cfg, codec_name(cfg));
    FAIL();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cfg.toml:2: key 'codec.topk_fraction'"), std::string::npos) << what;
    EXPECT_NE(what.find("the codec is int8"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(refuse_other_codec_keys(
      Config::from_string("codec.name = \"int8\"\ncodec.topk_fraction = 0.01"), "int8"));
}

}  // namespace
}  // namespace loom::plan
