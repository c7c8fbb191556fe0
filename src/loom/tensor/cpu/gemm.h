// CPU GEMM dispatch. oneDNN is the default: it picks AVX-512/AMX/AVX2 kernels at run time from
// CPUID features, so it is fast on CPUs newer than the BLAS build (docs/gemm.md has the
// comparison). Its matmul primitive (onednn_matmul.h) is the default path; dnnl_sgemm and
// OpenBLAS are kept for comparison and as second opinions in tests.
#pragma once

#include <cstdint>
#include <string>

namespace loom::cpu {

enum class GemmLibrary { kOneDnn, kOpenBlas, kOneDnnSgemm };

// Chosen once from LOOM_GEMM ("onednn" default: the matmul primitive; "onednn-sgemm":
// dnnl_sgemm; "openblas"); an unknown value or a library not built throws ConfigError.
GemmLibrary gemm_library();
void set_gemm_library(GemmLibrary lib);
std::string gemm_library_name(GemmLibrary lib);
// Threads of the calling thread's GEMMs (oneDNN: OpenMP, per thread); OpenBLAS's pool is
// process-wide, so with OpenBLAS the last call wins.
void set_gemm_threads(int threads);

// Row-major C = alpha op(A) op(B) + beta C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Plain triple loop, the reference for tests.
void sgemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc);

}  // namespace loom::cpu
