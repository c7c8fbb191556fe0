// A codec as a run asks for it, already read from the config (plan/codec_reader.h): its name,
// the settings every codec shares and the values of its own keys. make_codec (registry.h) builds
// it.
#pragma once

#include <optional>
#include <string>

#include "loom/compress/codec.h"
#include "loom/compress/codec_params.h"

namespace loom::compress {

struct CodecOptions {
  std::string name = "fp32";
  std::string where = "codec";  // where the name was set, for errors
  bool error_feedback = true;   // codec.error_feedback
  // codec.residual; unset: the codec's own default.
  std::optional<ResidualFormat> residual;
  std::string residual_where;
  CodecParams params;  // the codec's own keys (CodecKind::keys), every one present
};

}  // namespace loom::compress
