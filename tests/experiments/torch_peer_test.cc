// The PyTorch peer of `loom bench train` is the project's own (bench/peers/torch_mlp.py), found
// without any setting from a build inside the checkout, and a missing PyTorch says how to get it.
#include "loom/experiments/torch_peer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
  const PeerResult r = run_torch_peer(find_torch_peer(), PeerRun{}, 1, 1);
  ::unsetenv("LOOM_PYTHON");
  EXPECT_FALSE(r.ran);
  EXPECT_THAT(r.message, HasSubstr("PyTorch is not installed for /bin/false"));
  EXPECT_THAT(r.message, HasSubstr("scripts/setup-bench"));
  const PeerResult none = run_torch_peer("", PeerRun{}, 1, 1);
  EXPECT_THAT(none.message, HasSubstr("bench/peers/torch_mlp.py"));
}

TEST(TorchPeer, TheNewestPyTorchIsComparedWhereSetupBenchInstalledIt) {
  ::unsetenv("LOOM_PYTHON");
  const fs::path root = fs::temp_directory_path() / ("loom_peer_" + std::to_string(::getpid()));
  fs::create_directories(root / "bench/peers");
  const std::string script = (root / "bench/peers/torch_mlp.py").string();
  EXPECT_EQ(find_pythons(script), std::vector<std::string>{find_python(script)});
  fs::create_directories(root / ".venv-torch/bin");
  std::ofstream(root / ".venv-torch/bin/python") << "";
  const std::vector<std::string> both = find_pythons(script);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1], (root / ".venv-torch/bin/python").string());
  ::setenv("LOOM_PYTHON", "/bin/false", 1);  // one named python is the only one
  EXPECT_EQ(find_pythons(script), std::vector<std::string>{"/bin/false"});
  ::setenv("LOOM_PYTHON", "", 1);  // set to nothing: as if unset, not a python named ""
  EXPECT_EQ(find_pythons(script), both);
  ::unsetenv("LOOM_PYTHON");
  fs::remove_all(root);
}

TEST(TorchPeer, CompileIsTriedFromPyTorch2On) {
  EXPECT_FALSE(has_torch_compile("1.13.0a0+git"));
  EXPECT_FALSE(has_torch_compile(""));
  EXPECT_FALSE(has_torch_compile("unknown"));
  EXPECT_TRUE(has_torch_compile("2.0.1"));
  EXPECT_TRUE(has_torch_compile("2.9.1+cu128"));
  EXPECT_TRUE(has_torch_compile("10.0"));
}

}  // namespace
}  // namespace loom::experiments
