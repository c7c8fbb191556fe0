#include "loom/tensor/backend_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "loom/config.h"
#include "loom/core/error.h"

namespace loom {
namespace {

TEST(BackendRegistry, CpuIsAlwaysBuilt) {
  const auto names = built_backends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "cpu");
  auto be = make_backend("cpu");
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->device(), Device::kCpu);
  EXPECT_EQ(std::string(device_name(be->device())), "cpu");
  EXPECT_EQ(cpu_backend().device(), Device::kCpu);
  EXPECT_EQ(&cpu_backend(), &cpu_backend());  // one process-wide instance
}

TEST(BackendRegistry, UnknownNameIsAConfigErrorListingTheBuiltOnes) {
  try {
    make_backend("tpu");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'tpu'"), std::string::npos) << w;
    EXPECT_NE(w.find("cpu"), std::string::npos) << w;
  }
}

TEST(BackendRegistry, CudaNotBuiltSaysWhichOption) {
  const auto names = built_backends();
  const bool built = std::find(names.begin(), names.end(), "cuda") != names.end();
  EXPECT_EQ(built, bool(LOOM_HAVE_CUDA));
  if (built) GTEST_SKIP() << "CUDA backend built";
  try {
    make_backend("cuda");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("LOOM_CUDA"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
