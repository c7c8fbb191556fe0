#include "loom/cli/version.h"

#include <fmt/format.h>

#include "loom/config.h"

namespace loom::cli {

void print_version() {
  fmt::print("loom {} ({}, {})\n", LOOM_VERSION, LOOM_GIT_REV, LOOM_BUILD_TYPE);
  // cudnn=yes: built with cuDNN, loaded at run time where the machine has it (docs/gpu.md).
  fmt::print("features: gemm=oneDNN{} cuda={} cudnn={} nccl={} mpi={} onnx={}\n",
             LOOM_HAVE_OPENBLAS ? "+OpenBLAS" : "", LOOM_HAVE_CUDA ? "yes" : "no",
             LOOM_HAVE_CUDNN ? "yes" : "no", LOOM_HAVE_NCCL ? "yes" : "no",
             LOOM_HAVE_MPI ? "yes" : "no", LOOM_HAVE_ONNX ? "yes" : "no");
}

}  // namespace loom::cli
