// NCCL's overload of loom::cuda::check, so LOOM_CUDA_CHECK (tensor/cuda/cuda_check.h) takes
// ncclResult_t like cudaError_t and cublasStatus_t: one macro for all three libraries.
#pragma once

#include <nccl.h>

#include "loom/tensor/cuda/cuda_check.h"

namespace loom::cuda {

inline void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) check_failed("NCCL", int(r), ncclGetErrorString(r), call, file, line);
}

// LOOM_CUDA_IGNORE for NCCL: a failed NCCL call may leave a CUDA error behind it.
inline void ignore(ncclResult_t r) {
  if (r != ncclSuccess) (void)cudaGetLastError();
}

}  // namespace loom::cuda
