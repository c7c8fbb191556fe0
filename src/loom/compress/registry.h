// The one place that maps a codec name and its parameters to a Codec. Parameters come from a
// loom::Config; a bad name or value is a loom::ConfigError naming the key, where it was set,
// and what was wrong.
//
//   codec.name             "fp32" | "fp16" | "bf16" | "int8" | "onebit" | "topk" | "powersgd"
//   codec                  the same, as a bare key: TOML cannot hold both `codec = "int8"` and
//                          `codec.int8_block = 64` (a key is either a value or a table), so
//                          files that set parameters use codec.name; `--set codec=int8` works
//                          either way. Setting both is an error.
//   codec.error_feedback   bool, default true (false only to show why it matters)
//   codec.residual         "fp32" | "bf16": how the residual is stored (ResidualFormat);
//                          default bf16 for fp16 and bf16, which alone accept it
//   codec.int8_block       int, power of two in [8, 2^20], default 512
//   codec.onebit_column    int, multiple of 32 in [32, 2^24], default 512
//   codec.topk_fraction    float in (0, 1], default 0.01
//   codec.powersgd_rank    int in [1, 1024], default 4
//   codec.powersgd_cols    int in [0, 2^31], 0 = ceil(sqrt(bucket size)), default 0
//   codec.seed             int, default 0x5eed: PowerSGD's initial Q (identical on all ranks)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/core/config.h"

namespace loom::compress {

// All codec names, in the order the bench reports them.
const std::vector<std::string>& codec_names();

// The codec named by cfg's "codec.name" or "codec" key (default `default_name`), with its
// parameters.
std::unique_ptr<Codec> make_codec(const Config& cfg, const std::string& default_name = "fp32");
// The codec `name` with cfg's parameters (for callers that pick the name themselves).
std::unique_ptr<Codec> make_codec(const std::string& name, const Config& cfg);

// The name that make_codec(cfg) would build.
std::string codec_name(const Config& cfg, const std::string& default_name = "fp32");

// The keys above, for Config::check_known and `--help-config`.
std::vector<ConfigKeySpec> codec_config_keys();

}  // namespace loom::compress
