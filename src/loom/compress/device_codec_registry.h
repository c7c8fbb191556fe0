// The one place that knows which codecs have device kernels in this build (fp16, bf16, int8,
// onebit and top-k with CUDA). It sits above the codecs and their CUDA kernels, so neither
// links back into it.
#pragma once

#include <memory>
#include <string>

#include "loom/compress/codec.h"
#include "loom/compress/device_codec.h"
#include "loom/tensor/backend.h"

namespace loom::compress {

// The device kernels of `codec` on `backend` (which must outlive the result), or nullptr when
// there are none: a CPU backend, a build without CUDA, or a codec without kernels.
std::unique_ptr<DeviceCodec> make_device_codec(const Codec& codec, Backend& backend);
// Whether a codec of this name has device kernels in this build.
bool device_codec_built(const std::string& name);

}  // namespace loom::compress
