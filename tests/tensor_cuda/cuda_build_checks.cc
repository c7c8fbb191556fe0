// Checks of the CUDA backend's host-side pieces that need no GPU: the check macro's message,
// the pool's size classes, the error a machine without a GPU gets, and that a failed
// constructor leaves no stale error behind for the next launch check to report. Compiled into
// loom_tensor_cuda_tests only in CUDA builds (cmake/cuda.cmake adds it), since it names CUDA
// types; the file name keeps it out of the *_test.cc glob of CPU-only builds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cuda_check.h"
#include "loom/tensor/cuda/cudnn_conv.h"
#include "loom/tensor/cuda/memory_pool.h"
#include "tensor_cuda/gpu_compare.h"

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

bool have_gpu(std::string* why = nullptr) {
  return ::loom::test::gpu_present(why);
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

// The failed constructor's members are destroyed without a destructor body: the pool must not
// call cudaSetDevice for the device that does not exist, or the invalid-device error stays in
// the thread's last-error slot and the next kernel launch reports it as its own.
// (Without a driver the runtime's start-up error is returned by every call, cudaGetLastError
// included, so there is nothing to check there.)
TEST(CudaBackendSetup, AFailedConstructorLeavesNoStaleError) {
  std::string why;
  LOOM_REQUIRE_GPU_BECAUSE(have_gpu(&why), why);
  CudaBackend be(0);
  (void)cudaGetLastError();
  EXPECT_THROW(CudaBackend(1 << 20), ConfigError);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  DeviceBuffer<float> x(be, 1000);
  EXPECT_NO_THROW(be.fill(x.data(), 1000, 2.0f));  // a launch check (launch.cuh)
  std::vector<float> host(1000);
  be.copy_to_host(host.data(), x.data(), host.size() * sizeof(float));
  EXPECT_EQ(host[999], 2.0f);
}

// Needs no GPU: loading cuDNN and resolving its functions is host work (handles are made on
// first use, where a GPU is needed). A build with cuDNN opens it or names the library it could
// not load; a build without says how to build it.
TEST(CudnnBuild, OpensTheLibraryOrSaysWhy) {
  std::string why;
  const auto dnn = CudnnConv::open(0, false, &why);
  RecordProperty("cudnn", dnn ? dnn->version() : why);  // in the test report
#if LOOM_HAVE_CUDNN
  if (dnn) {
    EXPECT_EQ(dnn->version().rfind(std::to_string(LOOM_TEST_CUDNN_MAJOR) + ".", 0), 0u)
        << dnn->version();
    EXPECT_EQ(dnn->stats().calls, 0);
  } else {
    EXPECT_NE(why.find("libcudnn.so." + std::to_string(LOOM_TEST_CUDNN_MAJOR)), std::string::npos)
        << why;
  }
#else
  EXPECT_EQ(dnn, nullptr);
  EXPECT_NE(why.find("-DLOOM_CUDNN=ON"), std::string::npos) << why;
#endif
}

// Host work too: cuDNN's descriptors for loom's geometries, and cuDNN's own output size for
// them, which must be PyTorch's rule (the convolution descriptor takes padding, stride and
// dilation in that order: a mix-up shows here). Sizes past cuDNN's int range, and an output
// size other than the rule's, are not taken.
TEST(CudnnBuild, DescriptorsGiveTheOutputSizeOfPyTorchsRule) {
  std::string why;
  const auto dnn = CudnnConv::open(0, false, &why);
  if (!dnn) GTEST_SKIP() << "no cuDNN: " << why;
  auto conv = [](int64_t batch, int64_t c, int64_t h, int64_t w, int64_t k, int64_t kh, int64_t kw,
                 int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                 int64_t groups) {
    ConvGeometry g;
    g.batch = batch, g.in_c = c, g.in_h = h, g.in_w = w, g.out_c = k, g.kernel_h = kh;
    g.kernel_w = kw, g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw;
    g.dilation_h = dh, g.dilation_w = dw, g.groups = groups;
    g.out_h = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    g.out_w = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    return g;
  };
  const ConvGeometry taken[] = {
      conv(2, 4, 9, 7, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2),
      conv(3, 3, 8, 8, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1),
      conv(2, 4, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1),
      conv(2, 8, 16, 15, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1),
      conv(2, 6, 11, 13, 4, 3, 3, 1, 3, 2, 1, 2, 1, 2),
      conv(1, 6, 10, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6),
      conv(2, 8, 9, 9, 8, 5, 5, 1, 1, 2, 2, 1, 1, 8),
      conv(2, 2, 5, 5, 3, 5, 5, 3, 3, 2, 2, 1, 1, 1),
      conv(1, 3, 31, 17, 4, 7, 3, 3, 2, 3, 0, 2, 3, 1),
  };
  for (const ConvGeometry& g : taken) EXPECT_TRUE(dnn->takes(g)) << describe_conv(g);
  ConvGeometry cropped = taken[0];
  cropped.out_h -= 1;
  EXPECT_FALSE(dnn->takes(cropped));
  ConvGeometry wide = taken[1];
  wide.out_w += 1;
  EXPECT_FALSE(dnn->takes(wide));
  // 2^31 input elements: past cuDNN's int sizes.
  EXPECT_FALSE(dnn->takes(conv(int64_t(1) << 16, 8, 64, 64, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1)));
  EXPECT_EQ(dnn->stats().plans, int64_t(std::size(taken)) + 3);
  // bf16 and fp16 (Backend::set_matmul_precision): descriptors of those types, a plan of each
  // geometry per precision, the same output sizes and refusals.
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    for (const ConvGeometry& g : taken)
      EXPECT_TRUE(dnn->takes(g, p)) << precision_name(p) << " " << describe_conv(g);
    EXPECT_FALSE(dnn->takes(cropped, p)) << precision_name(p);
    EXPECT_FALSE(dnn->takes(wide, p)) << precision_name(p);
  }
  EXPECT_EQ(dnn->stats().plans, 3 * (int64_t(std::size(taken)) + 2) + 1);
  EXPECT_EQ(dnn->stats().calls, 0);
}

// Without a GPU cudnnCreate fails: ready() says so with cuDNN's status and the call's name,
// and says the same again without retrying.
TEST(CudnnBuild, NoGpuHandleErrorNamesTheCall) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present; this checks the message without one";
  std::string why;
  const auto dnn = CudnnConv::open(0, false, &why);
  if (!dnn) GTEST_SKIP() << "no cuDNN: " << why;
  std::string first, again;
  EXPECT_FALSE(dnn->ready({0, nullptr, nullptr, nullptr}, &first));
  EXPECT_NE(first.find("cuDNN error"), std::string::npos) << first;
  EXPECT_NE(first.find("in cudnnCreate on device 0"), std::string::npos) << first;
  EXPECT_FALSE(dnn->ready({0, nullptr, nullptr, nullptr}, &again));
  EXPECT_EQ(again, first);
  RecordProperty("cudnn_error", first);
}

TEST(CudnnBuild, GeometryTextNamesEveryField) {
  ConvGeometry g;
  g.batch = 2, g.in_c = 4, g.in_h = 9, g.in_w = 7, g.out_c = 6, g.out_h = 5, g.out_w = 8;
  g.kernel_h = 3, g.kernel_w = 2, g.stride_h = 2, g.stride_w = 1, g.pad_h = 1, g.pad_w = 0;
  g.dilation_h = 1, g.dilation_w = 2, g.groups = 2;
  EXPECT_EQ(describe_conv(g),
            "conv2d batch 2, in 4x9x7, out 6x5x8, kernel 3x2, stride 2x1, padding 1x0, "
            "dilation 1x2, groups 2");
}

// LOOM_CUDNN picks the engine when a backend is made; a value it does not know is a
// ConfigError naming it.
TEST(CudaBackendSetup, CudnnEnvironmentVariableChoosesTheEngine) {
  std::string why;
  LOOM_REQUIRE_GPU_BECAUSE(have_gpu(&why), why);
  struct Restore {
    std::string old;
    bool had = false;
    Restore() {
      if (const char* v = std::getenv("LOOM_CUDNN")) old = v, had = true;
    }
    ~Restore() {
      if (had) {
        setenv("LOOM_CUDNN", old.c_str(), 1);
      } else {
        unsetenv("LOOM_CUDNN");
      }
    }
  } restore;
  setenv("LOOM_CUDNN", "0", 1);
  {
    CudaBackend be(0);
    EXPECT_EQ(be.conv_engine(), "loom");
    EXPECT_NE(be.cudnn_unavailable().find("LOOM_CUDNN=0"), std::string::npos)
        << be.cudnn_unavailable();
  }
  setenv("LOOM_CUDNN", "sometimes", 1);
  try {
    CudaBackend be(0);
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("LOOM_CUDNN=sometimes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  setenv("LOOM_CUDNN", "1", 1);
  try {
    CudaBackend be(0);
    EXPECT_EQ(be.conv_engine().rfind("cudnn ", 0), 0u) << be.conv_engine();
  } catch (const ConfigError& e) {
    // Only where cuDNN cannot run: the error says why.
    EXPECT_NE(std::string(e.what()).find("cuDNN was asked for (LOOM_CUDNN=1) but"),
              std::string::npos)
        << e.what();
  }
}

// A communication thread on the side stream: its ops run after the mark it entered at, and
// the compute stream sees their results after join_side. Scratch, readback and allocation
// work there too.
TEST(CudaStreams, SideStreamRunsAfterItsMarkAndJoins) {
  std::string why;
  LOOM_REQUIRE_GPU_BECAUSE(have_gpu(&why), why);
  CudaBackend be(0);
  constexpr int64_t n = 1 << 20;
  DeviceBuffer<float> x(be, n), y(be, n), w(be, 1);
  be.fill(x.data(), n, 3.0f);
  be.mark(0);
  EXPECT_FALSE(be.on_side_stream());
  std::thread comm([&] {
    SideStream side(be, 0);
    EXPECT_TRUE(be.on_side_stream());
    EXPECT_EQ(be.stream(), be.comm_stream());
    be.copy(y.data(), x.data(), n * sizeof(float));
    be.scale(n, 2.0f, y.data());
    EXPECT_FALSE(be.has_non_finite(y.data(), n));
    DeviceBuffer<float> z(be, 1000);  // zeroed before the side stream uses it
    be.axpy(1000, 1.0f, z.data(), y.data());
    // GEMM through the side stream's own cuBLAS handle: w = y[0] * y[0].
    be.gemm(false, false, 1, 1, 1, 1.0f, y.data(), 1, y.data(), 1, 0.0f, w.data(), 1);
  });
  comm.join();
  EXPECT_FALSE(be.on_side_stream());
  be.join_side();
  be.scale(n, 0.5f, y.data());  // on the compute stream, after the side stream's work
  std::vector<float> host(static_cast<size_t>(n));
  be.copy_to_host(host.data(), y.data(), host.size() * sizeof(float));
  EXPECT_EQ(host[0], 3.0f);
  EXPECT_EQ(host[size_t(n) - 1], 3.0f);
  float w_host = 0;
  be.copy_to_host(&w_host, w.data(), sizeof(float));
  EXPECT_EQ(w_host, 36.0f);
  EXPECT_THROW(be.enter_side(7), Error);  // a mark never recorded
}

TEST(CudaPool, ReusesFreedBlocksInStreamOrder) {
  std::string why;
  LOOM_REQUIRE_GPU_BECAUSE(have_gpu(&why), why);
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
