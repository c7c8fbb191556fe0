// The only compress file with #if LOOM_HAVE_CUDA (docs/architecture.md: registries know the build).
#include "loom/compress/device_codec_registry.h"

#include "loom/compress/device_codec.h"
#include "loom/config.h"
#include "loom/tensor/backend.h"

#if LOOM_HAVE_CUDA
#include "loom/compress/cuda/cuda_codec.h"
#include "loom/tensor/cuda/cuda_backend.h"
#endif

namespace loom::compress {

std::unique_ptr<DeviceCodec> make_device_codec(const Codec& codec, Backend& backend) {
#if LOOM_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return make_cuda_codec(codec, *cuda);
#endif
  (void)codec;
  (void)backend;
  return nullptr;
}

bool device_codec_built(const std::string& name) {
#if LOOM_HAVE_CUDA
  return cuda_codec_exists(name);
#else
  (void)name;
  return false;
#endif
}

}  // namespace loom::compress
