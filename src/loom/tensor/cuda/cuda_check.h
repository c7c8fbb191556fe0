// The one check for CUDA runtime, cuBLAS and NCCL calls: LOOM_CUDA_CHECK(call) throws
// loom::Error naming the call, the place and the library's own error string. Each library's
// status type gets an overload of loom::cuda::check (NCCL's lives in comm/nccl/nccl_check.h),
// so the macro is the same everywhere.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace loom::cuda {

[[noreturn]] void check_failed(const char* library, int code, const char* message, const char* call,
                               const char* file, int line);

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) check_failed("CUDA", int(e), cudaGetErrorString(e), call, file, line);
}

const char* cublas_status_text(cublasStatus_t s);
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    check_failed("cuBLAS", int(s), cublas_status_text(s), call, file, line);
}

// For a call whose failure is deliberately ignored (cleanup in a destructor, a probe): the
// runtime also keeps a failed call's error in the thread's last-error slot, where the next
// launch check (launch.cuh) would find it and report it as its own. Clearing it keeps every
// later error message about the call that caused it.
inline void ignore(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
}
inline void ignore(cublasStatus_t s) {
  if (s != CUBLAS_STATUS_SUCCESS) (void)cudaGetLastError();  // cuBLAS's own CUDA calls
}

}  // namespace loom::cuda

#define LOOM_CUDA_CHECK(call) ::loom::cuda::check((call), #call, __FILE__, __LINE__)
// Runs `call` and drops its error, leaving no trace of it in the last-error slot.
#define LOOM_CUDA_IGNORE(call) ::loom::cuda::ignore(call)
