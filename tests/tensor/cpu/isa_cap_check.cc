// The ISA caps that the `isa` test label runs under (docs/determinism.md): run with
// ONEDNN_MAX_CPU_ISA set (tests/tensor/cpu/CMakeLists.txt does, for AVX2 and SSE4.1), this checks
// that oneDNN really dispatched no higher than that ISA and that its sgemm still matches
// cpu::sgemm_ref; with LOOM_MAX_CPU_ISA=avx2 also that loom's own dispatch takes no AVX-512 path.
// A separate executable, not a gtest, because both caps are read once, before the first call:
// one process per ISA.
//
// Usage: loom_isa_cap_check EXPECTED_ISA   (avx2 | sse41 | any)
// Exit 0 on success, 1 on a mismatch, 2 for a bad cap value (the error names it), 77 (CTest's
// skip code) if this CPU is below the ISA.
//        loom_isa_cap_check --native-is ISA   (avx2 | sse41), run with no cap set
// Exit 0 if this CPU's own best ISA is ISA for oneDNN and for loom's dispatch, so that a run
// capped at ISA takes the native run's kernels (tests/run_under_isa_cap.sh skips it then), 1 if
// not, 2 if a cap is set.
#include <oneapi/dnnl/dnnl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "loom/core/cpu_features.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/tensor/cpu/gemm.h"

namespace {

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all:
      return "all";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    default:
      return "other";
  }
}

// Max abs error relative to sum |a||b| over a sweep of shapes and transposes.
int check_gemm() {
  int failures = 0;
  loom::Rng rng(7, 0, loom::RngPurpose::kTest);
  const int64_t sizes[][3] = {{1, 1, 1},       {3, 17, 5},     {17, 129, 3}, {129, 17, 129},
                              {128, 256, 784}, {64, 10, 1024}, {33, 65, 97}};
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t)
      for (float beta : {0.0f, 1.0f}) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t m = s[0], n = s[1], k = s[2];
        const int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
        std::vector<float> a(size_t((ta ? k : m) * lda)), b(size_t((tb ? n : k) * ldb)),
            c(size_t(m * ldc));
        for (float& v : a) v = 2.0f * rng.uniform() - 1.0f;
        for (float& v : b) v = 2.0f * rng.uniform() - 1.0f;
        for (float& v : c) v = 2.0f * rng.uniform() - 1.0f;
        std::vector<float> want = c;
        loom::cpu::sgemm_ref(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta, want.data(),
                             ldc);
        loom::cpu::sgemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        // Entries are in [-1, 1]: |C| <= k + 1, float error about k * 2^-24 of that.
        const double tol = 4.0 * double(k + 1) * std::numeric_limits<float>::epsilon() *
                           std::sqrt(double(k) + 1.0);
        double worst = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t x = size_t(i * ldc + j);
            const double err = std::fabs(double(c[x]) - double(want[x]));
            if (std::isnan(err)) worst = std::numeric_limits<double>::infinity();
            if (err > worst) worst = err;
          }
        if (!(worst <= tol)) {
          std::fprintf(stderr, "FAIL m=%lld n=%lld k=%lld ta=%d tb=%d beta=%g: max error %g > %g\n",
                       (long long)m, (long long)n, (long long)k, int(ta), int(tb), double(beta),
                       worst, tol);
          ++failures;
        }
      }
  return failures;
}

// The cap a test asked oneDNN for: oneDNN 2.x reads ONEDNN_MAX_CPU_ISA, then the older name.
const char* onednn_cap() {
  if (const char* v = std::getenv("ONEDNN_MAX_CPU_ISA")) return v;
  return std::getenv("DNNL_MAX_CPU_ISA");
}

dnnl_cpu_isa_t isa_named(const std::string& name) {
  return name == "avx2" ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41;
}

int run(const std::string& expect) {
  const char* env = onednn_cap();
  const char* loom_cap = std::getenv("LOOM_MAX_CPU_ISA");
  // loom's own kernels: capped at AVX2, none of its AVX-512 paths may be taken.
  if (loom::cpu_isa_capped_at_avx2() &&
      (loom::cpu_has_avx512() || loom::cpu_has_avx512_bf16() || loom::cpu_has_avx512_vbmi())) {
    std::fprintf(stderr, "FAIL: LOOM_MAX_CPU_ISA=%s, yet loom reports AVX-512 kernels\n",
                 loom_cap ? loom_cap : "");
    return 1;
  }
  loom::cpu::set_gemm_library(loom::cpu::GemmLibrary::kOneDnn);
  // The first sgemm initialises oneDNN's dispatcher (and reads the cap).
  const int failures = check_gemm();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  std::printf(
      "ONEDNN_MAX_CPU_ISA=%s effective ISA %s (0x%x); LOOM_MAX_CPU_ISA=%s avx512 %s; "
      "%d failures\n",
      env ? env : "(unset)", isa_name(isa), unsigned(isa), loom_cap ? loom_cap : "(unset)",
      loom::cpu_has_avx512() ? "yes" : "no", failures);
  if (failures) return 1;
  if (expect == "any") return 0;
  const dnnl_cpu_isa_t want = isa_named(expect);
  if (isa == want) return 0;
  // Below the requested ISA: the CPU lacks it, so this check says nothing here.
  // oneDNN's ISA values are bit masks; a lower ISA's bits are a subset of a higher one's.
  if ((unsigned(isa) & unsigned(want)) == unsigned(isa) && isa != want) {
    std::printf("SKIP: this CPU is below %s\n", expect.c_str());
    return 77;
  }
  std::fprintf(stderr, "FAIL: expected oneDNN to dispatch to %s, it reports %s\n", expect.c_str(),
               isa_name(isa));
  return 1;
}

int native_is(const std::string& name) {
  if (onednn_cap() || std::getenv("LOOM_MAX_CPU_ISA")) {
    std::fprintf(stderr,
                 "--native-is asks the uncapped CPU: unset ONEDNN_MAX_CPU_ISA, "
                 "DNNL_MAX_CPU_ISA and LOOM_MAX_CPU_ISA\n");
    return 2;
  }
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const bool loom_avx512 =
      loom::cpu_has_avx512() || loom::cpu_has_avx512_bf16() || loom::cpu_has_avx512_vbmi();
  std::printf("native: oneDNN %s, loom's AVX-512 kernels %s\n", isa_name(isa),
              loom_avx512 ? "yes" : "no");
  return isa == isa_named(name) && !loom_avx512 ? 0 : 1;
}

bool known_isa(const std::string& name) {
  return name == "avx2" || name == "sse41";
}

}  // namespace

int main(int argc, char** argv) {
  const bool native = argc == 3 && std::strcmp(argv[1], "--native-is") == 0;
  if (!(argc == 2 || native) || (native && !known_isa(argv[2]))) {
    std::fprintf(stderr, "usage: %s avx2|sse41|any\n       %s --native-is avx2|sse41\n", argv[0],
                 argv[0]);
    return 2;
  }
  try {
    if (native) return native_is(argv[2]);
    return run(argv[1]);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return int(e.code());
  }
}
