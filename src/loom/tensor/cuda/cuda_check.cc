#include "loom/tensor/cuda/cuda_check.h"

#include <fmt/format.h>

#include "loom/core/error.h"

namespace loom::cuda {

void check_failed(const char* library, int code, const char* message, const char* call,
                  const char* file, int line) {
  throw Error(
      fmt::format("{} error {} ({}) in {} at {}:{}", library, code, message, call, file, line));
}

const char* cublas_status_text(cublasStatus_t s) {
  // cublasGetStatusString exists since CUDA 11.4; keep our own words for the common ones.
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "cuBLAS not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value (a dimension or leading dimension)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "GPU architecture not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "kernel execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return cublasGetStatusString(s);
  }
}

}  // namespace loom::cuda
