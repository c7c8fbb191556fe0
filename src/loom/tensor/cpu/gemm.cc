#include "loom/tensor/cpu/gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdlib>

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/tensor/cpu/onednn_matmul.h"

#if LOOM_HAVE_OPENBLAS
extern "C" {
// From cblas.h; declared here so that no BLAS header is needed at build time.
enum LoomCblasOrder { kCblasRowMajor = 101 };
enum LoomCblasTranspose { kCblasNoTrans = 111, kCblasTrans = 112 };
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int threads);
}
#endif

namespace loom::cpu {
namespace {

GemmLibrary library_from_env() {
  const char* env = std::getenv("LOOM_GEMM");
  std::string name = env ? env : "onednn";
  if (name == "onednn") return GemmLibrary::kOneDnn;
  if (name == "onednn-sgemm") return GemmLibrary::kOneDnnSgemm;
  if (name == "openblas") {
    if (!LOOM_HAVE_OPENBLAS)
      throw ConfigError("LOOM_GEMM=openblas: OpenBLAS was not found at build time");
    return GemmLibrary::kOpenBlas;
  }
  throw ConfigError(
      fmt::format("LOOM_GEMM='{}': unknown GEMM library (onednn, onednn-sgemm, openblas)", name));
}

std::atomic<int> g_library{-1};

}  // namespace

GemmLibrary gemm_library() {
  int v = g_library.load();
  if (v < 0) {
    v = static_cast<int>(library_from_env());
    g_library = v;
  }
  return static_cast<GemmLibrary>(v);
}

void set_gemm_library(GemmLibrary lib) {
  g_library = static_cast<int>(lib);
}

void set_gemm_threads(int threads) {
  omp_set_num_threads(threads < 1 ? 1 : threads);
#if LOOM_HAVE_OPENBLAS
  // OpenBLAS's pthread build keeps one process-wide pool and ignores OpenMP's setting.
  openblas_set_num_threads(threads < 1 ? 1 : threads);
#endif
}

std::string gemm_library_name(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::kOneDnn:
      return "oneDNN";
    case GemmLibrary::kOneDnnSgemm:
      return "oneDNN sgemm";
    case GemmLibrary::kOpenBlas:
      return "OpenBLAS";
  }
  return "?";
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // op(A) op(B) is empty: C = beta C. oneDNN returns success here without touching C, so
    // a gradient GEMM over an empty batch would leave stale values behind.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const GemmLibrary lib = gemm_library();
  if (lib == GemmLibrary::kOneDnn) {
    onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (lib == GemmLibrary::kOneDnnSgemm) {
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                  b, ldb, beta, c, ldc);
    LOOM_CHECK(st == dnnl_success, "dnnl_sgemm failed with status {}", int(st));
    return;
  }
#if LOOM_HAVE_OPENBLAS
  cblas_sgemm(kCblasRowMajor, trans_a ? kCblasTrans : kCblasNoTrans,
              trans_b ? kCblasTrans : kCblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda), b,
              int(ldb), beta, c, int(ldc));
#endif
}

void sgemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        float av = trans_a ? a[p * lda + i] : a[i * lda + p];
        float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        acc += double(av) * bv;
      }
      float prev = beta == 0 ? 0.0f : beta * c[i * ldc + j];
      c[i * ldc + j] = float(alpha * acc) + prev;
    }
}

}  // namespace loom::cpu
