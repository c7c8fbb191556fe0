// GEMM through oneDNN's matmul primitive, created once per shape and cached per thread.
//
// Why not dnnl_sgemm: it plans the product on every call, and on the training step's shapes
// the matmul primitive (brgemm kernels) runs the step's GEMMs ~6% faster on this machine
// (docs/gemm.md has the measurement). A primitive is bound to its shape, strides, alpha, beta
// and the calling thread's OpenMP thread count, so the cache is keyed by all of them; it is
// thread-local because a oneDNN stream must not be shared between threads, and each worker
// thread of the thread transport runs its own GEMMs.
#pragma once

#include <cstdint>

#include "loom/tensor/backend.h"

namespace loom::cpu {

// Row-major C = alpha op(A) op(B) + beta C, m, n, k > 0. Throws loom::Error if oneDNN refuses.
// With kBf16, A and B are rounded to bf16 (nearest even, by a oneDNN reorder into scratch
// buffers) and the bf16 matmul primitive multiplies them with fp32 accumulation into C.
void onednn_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc, Precision precision = Precision::kFp32);

// Primitives cached on the calling thread (for tests of the cache).
int64_t onednn_matmul_cached_primitives();

}  // namespace loom::cpu
