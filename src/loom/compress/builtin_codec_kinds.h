// The records of the codecs built into the library (builtin_codecs.cc), read by registry.cc.
#pragma once

#include <vector>

#include "loom/compress/codec_kind.h"

namespace loom::compress {

// In the order the benchmarks report them.
std::vector<CodecKind> builtin_codec_kinds();

}  // namespace loom::compress
