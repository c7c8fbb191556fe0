#include "loom/compress/registry.h"

#include <bit>

#include "loom/compress/bf16_codec.h"
#include "loom/compress/fp16_codec.h"
#include "loom/compress/identity_codec.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/powersgd_codec.h"
#include "loom/compress/topk_codec.h"
#include "loom/core/error.h"

namespace loom::compress {

const std::vector<std::string>& codec_names() {
  static const std::vector<std::string> names = {"fp32",   "fp16", "bf16",    "int8",
                                                 "onebit", "topk", "powersgd"};
  return names;
}

std::string codec_name(const Config& cfg, const std::string& default_name) {
  if (cfg.has("codec") && cfg.has("codec.name"))
    throw ConfigError(
        fmt::format("{}: key 'codec' and {}: key 'codec.name' both name the codec; "
                    "set one",
                    cfg.where("codec"), cfg.where("codec.name")));
  const char* key = cfg.has("codec") ? "codec" : "codec.name";
  return cfg.get_choice(key, default_name, codec_names());
}

std::unique_ptr<Codec> make_codec(const Config& cfg, const std::string& default_name) {
  return make_codec(codec_name(cfg, default_name), cfg);
}

std::unique_ptr<Codec> make_codec(const std::string& name, const Config& cfg) {
  std::unique_ptr<Codec> codec;
  if (name == "fp32") {
    codec = std::make_unique<IdentityCodec>();
  } else if (name == "fp16") {
    codec = std::make_unique<Fp16Codec>();
  } else if (name == "bf16") {
    codec = std::make_unique<Bf16Codec>();
  } else if (name == "int8") {
    int64_t block = cfg.get_int("codec.int8_block", int64_t(kInt8DefaultBlock), 8, 1 << 20);
    if (!std::has_single_bit(uint64_t(block)))
      throw ConfigError(fmt::format("{}: key 'codec.int8_block': {} is not a power of two",
                                    cfg.where("codec.int8_block"), block));
    codec = std::make_unique<Int8Codec>(size_t(block));
  } else if (name == "onebit") {
    int64_t col = cfg.get_int("codec.onebit_column", int64_t(kOnebitDefaultColumn), 32, 1 << 24);
    if (col % 32 != 0)
      throw ConfigError(fmt::format("{}: key 'codec.onebit_column': {} is not a multiple of 32",
                                    cfg.where("codec.onebit_column"), col));
    codec = std::make_unique<OnebitCodec>(size_t(col));
  } else if (name == "topk") {
    double f = cfg.get_double("codec.topk_fraction", kTopkDefaultFraction);
    if (!(f > 0.0 && f <= 1.0))
      throw ConfigError(fmt::format("{}: key 'codec.topk_fraction': {} is out of range (0, 1]",
                                    cfg.where("codec.topk_fraction"), f));
    codec = std::make_unique<TopkCodec>(f);
  } else if (name == "powersgd") {
    int64_t rank = cfg.get_int("codec.powersgd_rank", int64_t(kPowerSgdDefaultRank), 1, 1024);
    int64_t cols = cfg.get_int("codec.powersgd_cols", 0, 0, int64_t(1) << 31);
    int64_t seed = cfg.get_int("codec.seed", 0x5eed);
    codec = std::make_unique<PowerSgdCodec>(size_t(rank), size_t(cols), uint64_t(seed));
  } else {
    std::string list;
    for (const auto& n : codec_names()) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(fmt::format("{}: key 'codec': unknown codec \"{}\" (one of: {})",
                                  cfg.has("codec") ? cfg.where("codec") : "codec", name, list));
  }
  codec->set_error_feedback(cfg.get_bool("codec.error_feedback", true));
  if (cfg.has("codec.residual")) {
    const std::string f = cfg.get_choice("codec.residual", "fp32", {"fp32", "bf16"});
    if (f == "bf16" && !codec->supports_bf16_residual())
      throw ConfigError(fmt::format(
          "{}: key 'codec.residual': codec {} keeps its residual in fp32 only (bf16 residuals: "
          "fp16, bf16)",
          cfg.where("codec.residual"), name));
    codec->set_residual_format(f == "bf16" ? ResidualFormat::kBf16 : ResidualFormat::kF32);
  }
  return codec;
}

std::vector<ConfigKeySpec> codec_config_keys() {
  return {
      {"codec", ConfigType::kString, "\"fp32\"",
       "gradient codec: fp32 | fp16 | bf16 | int8 | onebit | topk | powersgd"},
      {"codec.name", ConfigType::kString, "\"fp32\"",
       "the same as `codec`, for files that also set codec.* parameters"},
      {"codec.error_feedback", ConfigType::kBool, "true",
       "keep what a lossy codec did not send and add it to the next step"},
      {"codec.residual", ConfigType::kString, "\"bf16\" (fp16, bf16) / \"fp32\"",
       "storage of the error-feedback residual: fp32 | bf16 (fp16 and bf16 codecs only)"},
      {"codec.int8_block", ConfigType::kInt, "512",
       "int8: elements per absmax block (power of two, 8 .. 2^20)"},
      {"codec.onebit_column", ConfigType::kInt, "512",
       "onebit: elements per pair of reconstruction values (multiple of 32)"},
      {"codec.topk_fraction", ConfigType::kDouble, "0.01",
       "topk: fraction of entries sent, (0, 1]"},
      {"codec.powersgd_rank", ConfigType::kInt, "4", "powersgd: rank of the approximation"},
      {"codec.powersgd_cols", ConfigType::kInt, "0",
       "powersgd: columns of the matrix a bucket is seen as (0: ceil(sqrt(n)))"},
      {"codec.seed", ConfigType::kInt, "24301", "powersgd: seed of the initial Q"},
  };
}

}  // namespace loom::compress
