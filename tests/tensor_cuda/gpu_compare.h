// Helpers for comparing the CUDA backend with the CPU reference, op by op, as ggml's
// test-backend-ops does: the same inputs on both, then either bit equality (where the format
// is exact) or a normalised mean squared error under a named budget.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/buffer.h"

namespace loom::test {

// Error budgets (normalised MSE, sum (gpu - cpu)^2 / sum cpu^2). Named so a failure says which
// kind of difference was allowed and why.
// fp32 GEMM: cuBLAS sums K products in another order (and blocks); ~1e-7 relative per element.
constexpr double kNmseGemm = 1e-10;
// Convolution through cuDNN: its FFT and Winograd algorithms transform the data and back, with
// errors of about 1e-5 relative per element (and its bias gradient sums in float); a wrong
// index, padding or group still shows as 1e-3 or more.
constexpr double kNmseCudnnConv = 1e-8;
// Reductions in a different order (bias gradients, channel sums).
constexpr double kNmseReduction = 1e-11;
// Elementwise arithmetic where nvcc may fuse a multiply-add into one FMA and g++ does not.
constexpr double kNmseElementwise = 1e-12;
// Softmax cross-entropy: double exponentials on both sides, row sums in another order.
constexpr double kNmseSoftmax = 1e-12;
// A whole graph: GEMM and reduction differences compound through a dozen layers.
constexpr double kNmseModel = 1e-8;

inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    err += d * d;
    ref += double(want[i]) * double(want[i]);
  }
  return ref > 0 ? err / ref : err;
}

// The CUDA backend, created once per process; null with the reason when there is none.
struct Gpu {
  std::unique_ptr<Backend> backend;
  std::string why_not;
  static Gpu& get() {
    static Gpu g = [] {
      Gpu r;
      try {
        r.backend = make_backend("cuda");
      } catch (const ConfigError& e) {
        r.why_not = e.what();
      }
      return r;
    }();
    return g;
  }
};

// The two sides of every comparison; gpu() only after LOOM_REQUIRE_GPU().
inline Backend& cpu() {
  return cpu_backend();
}
inline Backend& gpu() {
  return *Gpu::get().backend;
}

// LOOM_GPU_REQUIRED=1 (bench/gpu/check.sh sets it on the device machine): a missing GPU fails
// every GPU test instead of skipping it, so a machine whose CUDA did not start cannot pass
// the check with every test skipped.
inline bool gpu_required() {
  const char* v = std::getenv("LOOM_GPU_REQUIRED");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// Whether a CUDA device can be used, without creating a backend (clears the error it probes).
inline bool gpu_present(std::string* why = nullptr) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = cudaGetErrorString(e);
    return false;
  }
  if (n == 0 && why) *why = "the driver reports no device";
  return n > 0;
}

// Skips the test without a GPU, or fails it under LOOM_GPU_REQUIRED=1.
#define LOOM_REQUIRE_GPU_BECAUSE(have, why)                                        \
  do {                                                                             \
    if (!(have)) {                                                                 \
      if (::loom::test::gpu_required()) {                                          \
        GTEST_FAIL() << "LOOM_GPU_REQUIRED is set but there is no GPU: " << (why); \
      } else {                                                                     \
        GTEST_SKIP() << "no GPU to test on: " << (why);                            \
      }                                                                            \
    }                                                                              \
  } while (0)

#define LOOM_REQUIRE_GPU()                                              \
  LOOM_REQUIRE_GPU_BECAUSE(::loom::test::Gpu::get().backend != nullptr, \
                           ::loom::test::Gpu::get().why_not)

template <typename T>
DeviceBuffer<T> upload(Backend& be, const std::vector<T>& host) {
  DeviceBuffer<T> d(be, int64_t(host.size()));
  if (!host.empty()) be.copy_to_device(d.data(), host.data(), host.size() * sizeof(T));
  return d;
}

template <typename T>
std::vector<T> download(Backend& be, const DeviceBuffer<T>& d) {
  std::vector<T> host(size_t(d.size()));
  if (!host.empty()) be.copy_to_host(host.data(), d.data(), host.size() * sizeof(T));
  return host;
}

// The first n elements of a device buffer (one with canaries is longer).
template <typename T>
std::vector<T> download(Backend& be, const DeviceBuffer<T>& d, size_t n) {
  std::vector<T> host(n);
  if (n > 0) be.copy_to_host(host.data(), d.data(), n * sizeof(T));
  return host;
}

// Canaries: a fixed pattern in the bytes past the end of a buffer's payload, checked after the
// code under test ran, so a kernel or collective that writes one element too many shows.
constexpr size_t kCanaryBytes = 256;
inline std::vector<uint8_t> canary_pattern() {
  std::vector<uint8_t> p(kCanaryBytes);
  for (size_t i = 0; i < p.size(); ++i) p[i] = uint8_t(0xA5 ^ (i * 37));
  return p;
}
// Writes the pattern into the kCanaryBytes after `payload_bytes` of device memory `base`.
inline void set_canary(Backend& be, void* base, size_t payload_bytes) {
  const auto p = canary_pattern();
  be.copy_to_device(static_cast<uint8_t*>(base) + payload_bytes, p.data(), p.size());
}
inline bool canary_intact(Backend& be, const void* base, size_t payload_bytes) {
  std::vector<uint8_t> got(kCanaryBytes);
  be.copy_to_host(got.data(), static_cast<const uint8_t*>(base) + payload_bytes, got.size());
  return got == canary_pattern();
}
// A device buffer of n elements (zeroed) with a canary past its end.
template <typename T>
DeviceBuffer<T> guarded(Backend& be, size_t n) {
  DeviceBuffer<T> d(be, int64_t(n + (kCanaryBytes + sizeof(T) - 1) / sizeof(T)));
  set_canary(be, d.data(), n * sizeof(T));
  return d;
}
// `host` uploaded into a guarded buffer.
template <typename T>
DeviceBuffer<T> upload_guarded(Backend& be, const std::vector<T>& host) {
  DeviceBuffer<T> d = guarded<T>(be, host.size());
  if (!host.empty()) be.copy_to_device(d.data(), host.data(), host.size() * sizeof(T));
  return d;
}
#define EXPECT_CANARY(be, buffer, n)                                                            \
  EXPECT_TRUE(                                                                                  \
      ::loom::test::canary_intact((be), (buffer).data(), size_t(n) * sizeof(*(buffer).data()))) \
      << "written past the end of " #buffer " (" << (n) << " elements)"

// Uniform values in [lo, hi), seeded so every element differs and a wrong index shows.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  Rng rng(seed, 0, RngPurpose::kTest);
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

template <typename T>
bool bit_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Index of the first element whose bits differ, for the failure message (-1 if none).
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return int64_t(i);
  return a.size() == b.size() ? -1 : int64_t(std::min(a.size(), b.size()));
}

#define EXPECT_BITS_EQ(got, want)                                                                  \
  do {                                                                                             \
    const auto& g_ = (got);                                                                        \
    const auto& w_ = (want);                                                                       \
    const int64_t at_ = ::loom::test::first_difference(g_, w_);                                    \
    EXPECT_EQ(at_, -1) << "first difference at " << at_ << ": gpu "                                \
                       << (at_ >= 0 && size_t(at_) < g_.size() ? double(g_[at_]) : 0.0) << " cpu " \
                       << (at_ >= 0 && size_t(at_) < w_.size() ? double(w_[at_]) : 0.0);           \
  } while (0)

#define EXPECT_NMSE_LE(got, want, budget)                                          \
  do {                                                                             \
    const double e_ = ::loom::test::nmse((got), (want));                           \
    EXPECT_LE(e_, (budget)) << "normalised MSE " << e_ << " over budget " #budget; \
  } while (0)

}  // namespace loom::test
