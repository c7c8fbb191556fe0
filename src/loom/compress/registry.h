// Codecs by name, through the codecs' records (codec_kind.h), and the codec keys a run's config
// has; plan/codec_reader.h reads them into CodecOptions. A bad name or value is a
// loom::ConfigError naming the key, where it was set, and what was wrong.
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
#include "loom/compress/codec_options.h"
#include "loom/core/config_value.h"

namespace loom::compress {

// All codec names, in the order of codec_kinds().
const std::vector<std::string>& codec_names();

// The codec `o` names, with its settings and parameters. ConfigError naming the key for an
// unknown name, a parameter the codec's own checks refuse, or a residual format it cannot keep.
std::unique_ptr<Codec> make_codec(const CodecOptions& o);
// The codec `name` with every setting at its default.
std::unique_ptr<Codec> make_codec(const std::string& name);

// The codecs that can keep their residual in bf16 (codec.residual).
std::vector<std::string> bf16_residual_codecs();

// The keys above, for Config::check_known and `--help-config`.
std::vector<ConfigKeySpec> codec_config_keys();

}  // namespace loom::compress
