// DeviceCodec on a CudaBackend, over the kernels of tensor/cuda/codec_kernels.h (target
// loom_compress_cuda, CUDA builds only; compress/device_codec_registry.cc is its one caller).
#pragma once

#include <memory>

#include "loom/compress/device_codec.h"

namespace loom {
class CudaBackend;
}

namespace loom::compress {

// nullptr for a codec without CUDA kernels (fp32, powersgd).
std::unique_ptr<DeviceCodec> make_cuda_codec(const Codec& codec, CudaBackend& backend);
bool cuda_codec_exists(const std::string& name);

}  // namespace loom::compress
