#include "loom/tensor/backend_registry.h"

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#if LOOM_HAVE_CUDA
#include "loom/tensor/cuda/cuda_backend.h"
#endif

namespace loom {

const char* device_name(Device d) {
  return d == Device::kCpu ? "cpu" : "cuda";
}

std::vector<std::string> built_backends() {
  std::vector<std::string> names = {"cpu"};
#if LOOM_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "cuda") {
#if LOOM_HAVE_CUDA
    return make_cuda_backend();
#else
    throw ConfigError("backend 'cuda' was not built: configure with -DLOOM_CUDA=ON (needs nvcc)");
#endif
  }
  throw ConfigError(
      fmt::format("unknown backend '{}' (built: cpu{})", name, LOOM_HAVE_CUDA ? ", cuda" : ""));
}

}  // namespace loom
