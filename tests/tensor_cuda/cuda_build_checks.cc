// Checks of the CUDA backend's host-side pieces that need no GPU: the check macro's message,
// the pool's size classes and the error a machine without a GPU gets. Compiled into
// loom_tensor_cuda_tests only in CUDA builds (cmake/cuda.cmake adds it), since it names CUDA
// types; the file name keeps it out of the *_test.cc glob of CPU-only builds.
#include <gtest/gtest.h>

#include <string>

#include "loom/core/error.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cuda_check.h"
#include "loom/tensor/cuda/memory_pool.h"

namespace loom::cuda {
namespace {

TEST(CudaCheck, CudaErrorNamesCallAndErrorString) {
  try {
    LOOM_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA error 1"), std::string::npos) << what;
    EXPECT_NE(what.find("invalid argument"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;  // the call text
    EXPECT_NE(what.find("cuda_build_checks.cc"), std::string::npos) << what;
  }
}

TEST(CudaCheck, CublasStatusNamesLibrary) {
  try {
    LOOM_CUDA_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuBLAS error 7"), std::string::npos) << what;
    EXPECT_NE(what.find("leading dimension"), std::string::npos) << what;
  }
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(LOOM_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(LOOM_CUDA_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST(CudaPool, SizeClasses) {
  EXPECT_EQ(MemoryPool::size_class(0), 512u);
  EXPECT_EQ(MemoryPool::size_class(1), 512u);
  EXPECT_EQ(MemoryPool::size_class(512), 512u);
  EXPECT_EQ(MemoryPool::size_class(513), 1024u);
  EXPECT_EQ(MemoryPool::size_class(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(MemoryPool::size_class((size_t(1) << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(MemoryPool::size_class((size_t(5) << 20) + 7), size_t(6) << 20);
  // Past 4 GiB: no 32-bit overflow.
  EXPECT_EQ(MemoryPool::size_class((size_t(5) << 30) + 1), (size_t(5) << 30) + (size_t(2) << 20));
}

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  return ok;
}

TEST(CudaBackendSetup, NoGpuIsAConfigErrorNamingTheCause) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present; this checks the message without one";
  try {
    make_backend("cuda");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("backend 'cuda': no CUDA device found ("),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaBackendSetup, MissingDeviceIndexIsAConfigError) {
  EXPECT_THROW(CudaBackend(1 << 20), ConfigError);
}

TEST(CudaPool, ReusesFreedBlocksInStreamOrder) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU to allocate on";
  CudaBackend be(0);
  const auto before = be.pool_stats();
  void* a = be.allocate(1000);
  be.deallocate(a);
  void* b = be.allocate(900);  // same 1024-byte class: the cached block comes back
  EXPECT_EQ(a, b);
  const auto after = be.pool_stats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.misses - before.misses, 1);
  // A much larger request does not take a small cached block, nor a small one a huge block.
  void* big = be.allocate(size_t(64) << 20);
  be.deallocate(big);
  void* small = be.allocate(4096);
  EXPECT_NE(small, big);
  be.deallocate(small);
  be.deallocate(b);
}

}  // namespace
}  // namespace loom::cuda
