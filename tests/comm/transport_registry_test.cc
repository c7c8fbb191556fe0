// The transport registry's contract for the nccl transport, on any build and any machine: it
// is known; when not built, asking for it names the build option; when built on a machine
// without a GPU, creating its world is a ConfigError that says so (never a crash); it refuses
// comm.algorithm other than "auto". The thread world takes comm.algorithm and faked machines.
#include "loom/comm/transport_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom::comm {
namespace {

std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TransportRegistry, NcclIsKnownAndNotBuiltNamesTheBuildOption) {
  const auto known = known_transports();
  EXPECT_NE(std::find(known.begin(), known.end(), "nccl"), known.end());
  if (transport_built("nccl")) {
    EXPECT_EQ(resolve_transport("nccl"), "nccl");
  } else {
    const std::string e = config_error([] { resolve_transport("nccl"); });
    EXPECT_NE(e.find("LOOM_CUDA=ON"), std::string::npos) << e;
  }
  const std::string unknown = config_error([] { resolve_transport("infiniband"); });
  EXPECT_NE(unknown.find("nccl"), std::string::npos) << unknown;  // listed among the choices
}

TEST(TransportRegistry, NcclWorldWithoutEnoughGpusIsAConfigError) {
  if (!transport_built("nccl")) GTEST_SKIP() << "nccl transport not built";
  // 4096 workers on one machine: more than any machine's GPUs, and on a machine without a
  // GPU the error says there is none. Either way a ConfigError before NCCL starts.
  const std::string e = config_error([] { create_world("nccl", 4096, CommOptions{}); });
  EXPECT_TRUE(e.find("no CUDA device") != std::string::npos ||
              e.find("one GPU per worker") != std::string::npos)
      << e;
}

TEST(TransportRegistry, NcclRefusesAnAllreduceAlgorithmOfLooms) {
  if (!transport_built("nccl")) GTEST_SKIP() << "nccl transport not built";
  // Refused before any GPU is looked for: NCCL's collectives are its own.
  CommOptions o;
  o.algorithm = AllreduceAlgorithm::kTwoLevel;
  const std::string e = config_error([&] { create_world("nccl", 4096, o); });
  EXPECT_NE(e.find("comm.algorithm = \"two-level\""), std::string::npos) << e;
  EXPECT_NE(e.find("NCCL's own collectives"), std::string::npos) << e;
}

TEST(TransportRegistry, ThreadWorldTakesTheAlgorithmAndFakedMachines) {
  CommOptions o;
  o.algorithm = AllreduceAlgorithm::kTwoLevel;
  o.ranks_per_node = 2;
  auto world = create_world("thread", 4, o);
  EXPECT_EQ(world->local(3).machine_of_rank(), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(world->local(0).allreduce_path(4), Communicator::AllreducePath::kTwoLevel);
  o.ranks_per_node = 3;  // machines of 3 and 1
  const std::string e = config_error([&] { create_world("thread", 4, o); });
  EXPECT_NE(e.find("2 machines with 3, 1 ranks"), std::string::npos) << e;
}

// Callers ask a transport what it can do: the records agree with the communicators they make,
// and with the registry's other answers.
TEST(TransportRegistry, RecordsDescribeWhatEachTransportDoes) {
  const auto& kinds = transport_kinds();
  ASSERT_FALSE(kinds.empty());
  for (const TransportKind& k : kinds) {
    EXPECT_EQ(transport_built(k.name), k.built) << k.name;
    EXPECT_EQ(&transport_kind(k.name), &k) << k.name;
    EXPECT_FALSE(k.summary.empty()) << k.name;
    if (!k.built) {
      const std::string e = config_error([&] { resolve_transport(k.name); });
      EXPECT_NE(e.find(k.build_hint), std::string::npos) << e;
    }
  }
  EXPECT_FALSE(transport_kind("thread").device_memory);
  auto world = create_world("thread", 2, CommOptions{});
  EXPECT_TRUE(world->local(0).in_one_process());
  EXPECT_EQ(world->local(0).device_memory(), transport_kind("thread").device_memory);
  const std::string e = config_error([] { transport_kind("carrier-pigeon"); });
  EXPECT_NE(e.find("thread"), std::string::npos) << e;
}

}  // namespace
}  // namespace loom::comm
