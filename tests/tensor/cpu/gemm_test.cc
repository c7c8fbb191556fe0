// cpu::sgemm through each built library (oneDNN, OpenBLAS) against cpu::sgemm_ref: all four
// transpose combinations, odd sizes, leading dimensions wider than the matrices, beta 0 and 1.
#include "loom/tensor/cpu/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "loom/config.h"
#include "loom/core/rng.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cpu/onednn_matmul.h"

namespace loom::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;

std::vector<GemmLibrary> built_libraries() {
  std::vector<GemmLibrary> libs = {GemmLibrary::kOneDnn, GemmLibrary::kOneDnnSgemm};
  if (LOOM_HAVE_OPENBLAS) libs.push_back(GemmLibrary::kOpenBlas);
  return libs;
}

// Restores the process-wide library choice after each test.
class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = gemm_library(); }
  void TearDown() override { set_gemm_library(saved_); }
  GemmLibrary saved_ = GemmLibrary::kOneDnn;
};

TEST_F(GemmTest, ReferenceMatchesHandComputedProduct) {
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: A B = [58 64; 139 154].
  const float a[] = {1, 2, 3, 4, 5, 6};
  const float b[] = {7, 8, 9, 10, 11, 12};
  float c[] = {1, 1, 1, 1};
  sgemm_ref(false, false, 2, 2, 3, 1.0f, a, 3, b, 2, 1.0f, c, 2);
  EXPECT_EQ(c[0], 59);
  EXPECT_EQ(c[1], 65);
  EXPECT_EQ(c[2], 140);
  EXPECT_EQ(c[3], 155);
  // A^T stored as [3, 2], B^T stored as [2, 3]; alpha 2, beta 0 ignores NaN in C.
  const float at[] = {1, 4, 2, 5, 3, 6};
  const float bt[] = {7, 9, 11, 8, 10, 12};
  float d[] = {kNaN, kNaN, kNaN, kNaN};
  sgemm_ref(true, true, 2, 2, 3, 2.0f, at, 2, bt, 3, 0.0f, d, 2);
  EXPECT_EQ(d[0], 116);
  EXPECT_EQ(d[1], 128);
  EXPECT_EQ(d[2], 278);
  EXPECT_EQ(d[3], 308);
}

// Stored matrix of `rows` x `cols` with leading dimension ld >= cols; the padding holds NaN so
// a library that reads it into the result fails.
std::vector<float> random_matrix(Rng& rng, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> m(size_t(rows * ld), kNaN);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m[size_t(r * ld + c)] = 2.0f * rng.uniform() - 1.0f;
  return m;
}

std::vector<float> absolute(std::vector<float> m) {
  for (float& v : m) v = std::fabs(v);  // NaN padding stays NaN and is never read by the ref
  return m;
}

// Runs one case through the current library and the reference; checks every element of C
// within a bound proportional to k and to sum |alpha a b| + |beta c|, and that C's padding
// is untouched.
void check_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                int64_t pad, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << gemm_library_name(gemm_library()) << " ta=" << ta
                                    << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k
                                    << " alpha=" << alpha << " beta=" << beta << " pad=" << pad);
  Rng rng(seed, 0, RngPurpose::kTest);
  // op(A) is [m, k]: stored [k, m] when transposed.
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::vector<float> a = random_matrix(rng, a_rows, a_cols, std::max<int64_t>(lda, 1));
  std::vector<float> b = random_matrix(rng, b_rows, b_cols, std::max<int64_t>(ldb, 1));
  std::vector<float> c = random_matrix(rng, m, n, ldc);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = n; j < ldc; ++j) c[size_t(r * ldc + j)] = kSentinel;
  std::vector<float> c_in = c;
  if (beta == 0.0f)  // BLAS semantics: C is not read when beta is 0
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) c[size_t(r * ldc + j)] = kNaN;

  std::vector<float> want = c_in;
  sgemm_ref(ta, tb, m, n, k, alpha, a.data(), std::max<int64_t>(lda, 1), b.data(),
            std::max<int64_t>(ldb, 1), beta, want.data(), ldc);
  std::vector<float> mag = absolute(c_in);
  std::vector<float> abs_a = absolute(a), abs_b = absolute(b);
  sgemm_ref(ta, tb, m, n, k, std::fabs(alpha), abs_a.data(), std::max<int64_t>(lda, 1),
            abs_b.data(), std::max<int64_t>(ldb, 1), std::fabs(beta), mag.data(), ldc);

  sgemm(ta, tb, m, n, k, alpha, a.data(), std::max<int64_t>(lda, 1), b.data(),
        std::max<int64_t>(ldb, 1), beta, c.data(), ldc);

  const double unit = std::numeric_limits<float>::epsilon();
  int failures = 0;
  for (int64_t r = 0; r < m && failures < 5; ++r) {
    for (int64_t j = 0; j < ldc && failures < 5; ++j) {
      const size_t i = size_t(r * ldc + j);
      if (j >= n) {
        if (c[i] != kSentinel) {
          ADD_FAILURE() << "padding of C written at (" << r << ", " << j << "): " << c[i];
          ++failures;
        }
        continue;
      }
      const double tol = 2.0 * unit * double(k + 2) * mag[i] + 1e-30;
      if (!(std::fabs(double(c[i]) - want[i]) <= tol)) {
        ADD_FAILURE() << "C(" << r << ", " << j << ") = " << c[i] << ", reference " << want[i]
                      << ", tolerance " << tol;
        ++failures;
      }
    }
  }
}

TEST_F(GemmTest, AllTransposesOddSizesWideLeadingDimsBothBetas) {
  const int64_t sizes[] = {1, 3, 17, 129};
  for (GemmLibrary lib : built_libraries()) {
    set_gemm_library(lib);
    ASSERT_EQ(gemm_library(), lib);
    uint64_t seed = 1;
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t m : sizes)
          for (int64_t n : sizes)
            for (int64_t k : sizes)
              for (float beta : {0.0f, 1.0f}) {
                // Alternate tight and padded leading dimensions, and two alphas.
                const int64_t pad = (seed % 2 == 0) ? 0 : 3 + int64_t(seed % 5);
                const float alpha = (seed % 3 == 0) ? -0.5f : 1.0f;
                check_case(ta, tb, m, n, k, alpha, beta, pad, seed++);
              }
  }
}

TEST_F(GemmTest, MlpShapesWithPaddedLeadingDims) {
  // The shapes the default MLP runs (batch 128, 784 -> 1024 -> 10), forward and backward.
  for (GemmLibrary lib : built_libraries()) {
    set_gemm_library(lib);
    check_case(false, true, 128, 1024, 784, 1.0f, 0.0f, 16, 101);  // y = x W^T
    check_case(true, false, 10, 1024, 128, 1.0f, 0.0f, 1, 102);    // dW = dy^T x
    check_case(false, false, 128, 1024, 10, 1.0f, 1.0f, 5, 103);   // dx = dy W
  }
}

// An untransposed B at a 4 KiB boundary with a 4 KiB row stride (a weight in the backward
// pass's dX = dY W): the oneDNN path computes on a copy of it off that alignment
// (onednn_matmul.cc); the product is the reference's either way, B is left as it was, and the
// rows' tails past n (ldb > n) are neither read into the result nor written.
TEST_F(GemmTest, AnAlignedBWithA4KiBRowStrideGivesTheReferenceProduct) {
  const int64_t m = 64, n = 1000, k = 300, ldb = 1024;
  Rng rng(7, 0, RngPurpose::kTest);
  std::vector<float> a = random_matrix(rng, m, k, k);
  std::vector<float> storage(size_t(k * ldb) + 2048);
  const uintptr_t start = reinterpret_cast<uintptr_t>(storage.data());
  for (size_t offset : {size_t(0), size_t(16)}) {
    float* b = reinterpret_cast<float*>((start + 4095) / 4096 * 4096 + offset);
    const std::vector<float> values = random_matrix(rng, k, ldb, ldb);
    std::copy(values.begin(), values.end(), b);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = n; j < ldb; ++j) b[r * ldb + j] = kNaN;  // must not reach C
    const std::vector<float> b_before(b, b + k * ldb);
    std::vector<float> want(size_t(m * n)), got(size_t(m * n)), mag(size_t(m * n));
    sgemm_ref(false, false, m, n, k, 1.0f, a.data(), k, b, ldb, 0.0f, want.data(), n);
    std::vector<float> abs_a = absolute(a), abs_b(b, b + k * ldb);
    for (float& x : abs_b) x = std::fabs(x);
    sgemm_ref(false, false, m, n, k, 1.0f, abs_a.data(), k, abs_b.data(), ldb, 0.0f, mag.data(), n);
    set_gemm_library(GemmLibrary::kOneDnn);
    sgemm(false, false, m, n, k, 1.0f, a.data(), k, b, ldb, 0.0f, got.data(), n);
    // Float rounding of k products: a few units in the last place of the magnitudes' sum.
    const double unit = std::numeric_limits<float>::epsilon();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(double(got[i]) - double(want[i])), 2.0 * k * unit * double(mag[i]))
          << "B at +" << offset << ", element " << i;
    for (size_t i = 0; i < b_before.size(); ++i)
      ASSERT_TRUE(b[i] == b_before[i] || (std::isnan(b[i]) && std::isnan(b_before[i])))
          << "B changed at " << i;
  }
}

TEST_F(GemmTest, TwoThreadsMatchTheReference) {
  const int saved = omp_get_max_threads();
  make_backend("cpu")->set_intra_op_threads(2);
  for (GemmLibrary lib : built_libraries()) {
    set_gemm_library(lib);
    check_case(false, true, 256, 512, 300, 1.0f, 0.0f, 0, 201);
    check_case(true, false, 64, 300, 256, 1.0f, 1.0f, 2, 202);
  }
  omp_set_num_threads(saved);
}

TEST_F(GemmTest, EmptyDimensions) {
  for (GemmLibrary lib : built_libraries()) {
    set_gemm_library(lib);
    SCOPED_TRACE(gemm_library_name(lib));
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {1, 2, 3, 4};
    sgemm(false, false, 0, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);  // m = 0: nothing written
    sgemm(false, false, 2, 0, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);  // n = 0: nothing written
    EXPECT_EQ(c[0], 1);
    EXPECT_EQ(c[3], 4);
    // k = 0: C = beta C.
    sgemm(false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.5f, c, 2);
    EXPECT_EQ(c[0], 0.5f);
    EXPECT_EQ(c[1], 1.0f);
    EXPECT_EQ(c[2], 1.5f);
    EXPECT_EQ(c[3], 2.0f);
    sgemm(false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.0f, c, 2);
    EXPECT_EQ(c[0], 0.0f);
    EXPECT_EQ(c[3], 0.0f);
  }
}

TEST_F(GemmTest, MatmulPrimitivesAreCachedPerShapeAndThread) {
  set_gemm_library(GemmLibrary::kOneDnn);
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 2.0f), c(64 * 64);
  const int64_t before = onednn_matmul_cached_primitives();
  sgemm(false, false, 8, 16, 32, 1.0f, a.data(), 32, b.data(), 16, 0.0f, c.data(), 16);
  EXPECT_EQ(onednn_matmul_cached_primitives(), before + 1);
  EXPECT_EQ(c[0], 64.0f);
  // Same shape, other buffers: the cached primitive runs on the new pointers.
  std::vector<float> a2(64 * 64, 3.0f), c2(64 * 64);
  sgemm(false, false, 8, 16, 32, 1.0f, a2.data(), 32, b.data(), 16, 0.0f, c2.data(), 16);
  EXPECT_EQ(onednn_matmul_cached_primitives(), before + 1);
  EXPECT_EQ(c2[0], 192.0f);
  EXPECT_EQ(c[0], 64.0f);
  // Another beta is another primitive.
  sgemm(false, false, 8, 16, 32, 1.0f, a.data(), 32, b.data(), 16, 1.0f, c.data(), 16);
  EXPECT_EQ(onednn_matmul_cached_primitives(), before + 2);
  EXPECT_EQ(c[0], 128.0f);
  // A fresh thread starts with its own, empty cache.
  int64_t in_thread = -1;
  std::thread t([&] {
    in_thread = onednn_matmul_cached_primitives();
    std::vector<float> c3(64 * 64);
    sgemm(false, false, 8, 16, 32, 1.0f, a.data(), 32, b.data(), 16, 0.0f, c3.data(), 16);
    EXPECT_EQ(c3[0], 64.0f);
  });
  t.join();
  EXPECT_EQ(in_thread, 0);
}

TEST_F(GemmTest, BackendNameNamesTheLibrary) {
  EXPECT_EQ(gemm_library_name(GemmLibrary::kOneDnn), "oneDNN");
  EXPECT_EQ(gemm_library_name(GemmLibrary::kOpenBlas), "OpenBLAS");
  EXPECT_EQ(gemm_library_name(GemmLibrary::kOneDnnSgemm), "oneDNN sgemm");
  set_gemm_library(GemmLibrary::kOneDnn);
  EXPECT_EQ(make_backend("cpu")->name(), "cpu (oneDNN)");
}

}  // namespace
}  // namespace loom::cpu
