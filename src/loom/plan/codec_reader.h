// A run's codec keys (compress/registry.h lists them) read into compress::CodecOptions: the
// name, codec.error_feedback, codec.residual and the chosen codec's own keys with the ranges its
// record declares. The one place that knows `codec` and `codec.name` name the same thing.
#pragma once

#include <string>

#include "loom/compress/codec_options.h"
#include "loom/core/config.h"

namespace loom::plan {

// The key that names the codec in cfg: "codec.name" when that is set, else "codec" (set or not).
std::string codec_key(const Config& cfg);

// The codec cfg names (default `default_name`). ConfigError naming the keys when both spellings
// are set, or the key for an unknown name.
std::string codec_name(const Config& cfg, const std::string& default_name = "fp32");

// The codec cfg names, with its settings and parameters.
compress::CodecOptions read_codec_options(const Config& cfg,
                                          const std::string& default_name = "fp32");
// The codec `name` (a caller's choice: auto, a benchmark, Python) with cfg's settings and the
// parameters of that codec.
compress::CodecOptions read_codec_options(const std::string& name, const Config& cfg);

// What a training run's codec leaves meaningless: the parameters of the other codecs
// (codec.topk_fraction with codec int8) and codec.error_feedback = false with a lossless codec,
// which keeps nothing to feed back. ConfigError naming the key when one is set to other than its
// default. Not part of read_codec_options: `loom bench codec` and Python hand one set of
// parameters to several codecs.
void refuse_other_codec_keys(const Config& cfg, const std::string& name);

}  // namespace loom::plan
