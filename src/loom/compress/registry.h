// Codec names and codec.* keys to codecs, through the codecs' records (codec_kind.h). A bad
// name or value is a loom::ConfigError naming the key, where it was set, and what was wrong.
//
//   codec.name             a codec's name (codec_names(); `loom train --help-config` lists them)
//   codec                  the same, as a bare key: TOML cannot hold both `codec = "int8"` and
//                          `codec.int8_block = 64` (a key is either a value or a table), so
//                          files that set parameters use codec.name; `--set codec=int8` works
//                          either way. Setting both is an error.
//   codec.error_feedback   bool, default true (false only to show why it matters)
//   codec.residual         "fp32" | "bf16": how the residual is stored (ResidualFormat);
//                          default bf16 for the codecs that accept it (fp16, bf16)
//   codec.<kind>_...       each codec's own parameters, listed in its record
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/compress/codec_kind.h"
#include "loom/core/config.h"

namespace loom::compress {

// All codec names, in the order of codec_kinds().
const std::vector<std::string>& codec_names();

// The codec named by cfg's "codec.name" or "codec" key (default `default_name`), with its
// parameters.
std::unique_ptr<Codec> make_codec(const Config& cfg, const std::string& default_name = "fp32");
// The codec `name` with cfg's parameters (for callers that pick the name themselves).
std::unique_ptr<Codec> make_codec(const std::string& name, const Config& cfg);

// The key that names the codec in cfg: "codec.name" when that is set, else "codec" (set or not).
// The one place that knows the two spellings.
std::string codec_key(const Config& cfg);

// The name that make_codec(cfg) would build.
std::string codec_name(const Config& cfg, const std::string& default_name = "fp32");

// What a training run's codec leaves meaningless: the parameters of the other codecs
// (codec.topk_fraction with codec int8) and codec.error_feedback = false with a lossless codec,
// which keeps nothing to feed back. ConfigError naming the key when one is set to other than its
// default. Not part of make_codec: `loom bench codec` and Python hand one set of parameters to
// several codecs.
void refuse_other_codec_keys(const Config& cfg, const std::string& name);

// The keys above, for Config::check_known and `--help-config`.
std::vector<ConfigKeySpec> codec_config_keys();

}  // namespace loom::compress
