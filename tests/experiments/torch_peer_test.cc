// The PyTorch peer of `loom bench train` is the project's own (bench/peers/torch_mlp.py), found
// without any setting from a build inside the checkout, and a missing PyTorch says how to get it.
#include "loom/experiments/torch_peer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace loom::experiments {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(TorchPeer, TheCheckoutsPeerIsFoundByDefault) {
  ::unsetenv("LOOM_TORCH_PEER");
  const std::string peer = find_torch_peer();
  ASSERT_FALSE(peer.empty());
  EXPECT_TRUE(fs::equivalent(peer, fs::path(LOOM_SOURCE_DIR) / "bench/peers/torch_mlp.py"));
  ::setenv("LOOM_TORCH_PEER", "/nonexistent/peer.py", 1);
  EXPECT_EQ(find_torch_peer(), "");
  ::unsetenv("LOOM_TORCH_PEER");
}

TEST(TorchPeer, TheTunedKernelsAreOnesTheCpuHas) {
  EXPECT_EQ(openblas_core_type(true, true, false), "SkylakeX");
  EXPECT_EQ(openblas_core_type(true, true, true), "SkylakeX");
  EXPECT_EQ(openblas_core_type(false, true, true), "Zen");
  EXPECT_EQ(openblas_core_type(false, true, false), "Haswell");
  EXPECT_EQ(openblas_core_type(false, false, false), "");
  // This CPU: never AVX-512 kernels without AVX-512 (the SIGILL of an AVX2-only CPU).
  const std::string here = openblas_core_type_here();
  if (!__builtin_cpu_supports("avx512f")) {
    EXPECT_NE(here, "SkylakeX");
  }
  if (!__builtin_cpu_supports("avx2")) {
    EXPECT_EQ(here, "");
  }
}

TEST(TorchPeer, AMissingPyTorchSaysHowToGetIt) {
  ::setenv("LOOM_PYTHON", "/bin/false", 1);  // a "python" that cannot import torch
  EXPECT_EQ(find_python("/x/bench/peers/torch_mlp.py"), "/bin/false");
  const PeerResult r = run_torch_peer(find_torch_peer(), 1, 1, false);
  ::unsetenv("LOOM_PYTHON");
  EXPECT_FALSE(r.ran);
  EXPECT_THAT(r.message, HasSubstr("PyTorch is not installed for /bin/false"));
  EXPECT_THAT(r.message, HasSubstr("scripts/setup-bench"));
  const PeerResult none = run_torch_peer("", 1, 1, false);
  EXPECT_THAT(none.message, HasSubstr("bench/peers/torch_mlp.py"));
}

}  // namespace
}  // namespace loom::experiments
