#include "loom/cli/version.h"

#include <fmt/format.h>

#include <string>

#include "loom/comm/transport_registry.h"
#include "loom/config.h"
#include "loom/git_rev.h"

namespace loom::cli {

void print_version() {
  fmt::print("loom {} ({}, {})\n", LOOM_VERSION, LOOM_GIT_REV, LOOM_BUILD_TYPE);
  // cudnn=yes: built with cuDNN, loaded at run time where the machine has it (docs/gpu.md).
  // Then every optional transport, from the registry's records.
  std::string transports;
  for (const comm::TransportKind& k : comm::transport_kinds())
    if (!k.build_hint.empty()) transports += fmt::format(" {}={}", k.name, k.built ? "yes" : "no");
  fmt::print("features: gemm=oneDNN{} cuda={} cudnn={}{} onnx={}\n",
             LOOM_HAVE_OPENBLAS ? "+OpenBLAS" : "", LOOM_HAVE_CUDA ? "yes" : "no",
             LOOM_HAVE_CUDNN ? "yes" : "no", transports, LOOM_HAVE_ONNX ? "yes" : "no");
}

}  // namespace loom::cli
