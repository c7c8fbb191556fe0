#include "loom/core/cpu_features.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "loom/core/error.h"

namespace loom {
namespace {

bool capped_from_env() {
  const char* env = std::getenv("LOOM_MAX_CPU_ISA");
  const std::string value = env ? env : "";
  if (value.empty() || value == "native") return false;
  if (value == "avx2") return true;
  // loom is compiled for x86-64-v3, so there is no cap below AVX2 to offer.
  throw ConfigError(fmt::format(
      "LOOM_MAX_CPU_ISA='{}': give avx2 (no AVX-512 kernels) or native (what the CPU has)", value));
}

}  // namespace

bool cpu_isa_capped_at_avx2() {
  static const bool capped = capped_from_env();
  return capped;
}

}  // namespace loom
