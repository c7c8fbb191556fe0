// comm.algorithm = "two-level" reaches the allreduce strategy: 4 workers on the thread transport
// with machines of 2 ranks faked (comm.ranks_per_node) train the same parameters as the flat
// ring to float rounding (the sums are associated differently: inside machines first), every
// replica ends with the same bits, and the strategy says which algorithm carries its buckets.
#include <gtest/gtest.h>

#include <string>

#include "tiny_training.h"

namespace loom::sync {
namespace {

using testing::max_abs_diff;
using testing::run_tiny;
using testing::tiny_config;

Config two_by_two(const std::string& algorithm) {
  Config cfg = tiny_config();
  cfg.set("optim.momentum", 0.9);
  cfg.set("sync.bucket_kib", int64_t(1));  // several buckets (the model has ~1000 floats)
  cfg.set("comm.ranks_per_node", int64_t(2));
  cfg.set("comm.algorithm", algorithm);
  return cfg;
}

TEST(TwoLevelTraining, FourWorkersOnTwoMachinesTrainAsTheFlatRing) {
  Config ring_cfg = two_by_two("ring");
  ring_cfg.set("sync.shard_optimizer", false);  // the ring's allreduce, not its reduce-scatter
  const testing::TinyRun ring = run_tiny(ring_cfg, 4, 30, 16);
  const testing::TinyRun two = run_tiny(two_by_two("two-level"), 4, 30, 16);
  EXPECT_NE(ring.describe.find("comm.algorithm ring"), std::string::npos) << ring.describe;
  EXPECT_NE(two.describe.find("two-level (2 machines x 2 ranks)"), std::string::npos)
      << two.describe;
  EXPECT_NE(two.describe.find("optimizer not sharded (two-level allreduce)"), std::string::npos)
      << two.describe;
  EXPECT_TRUE(two.replicas_equal);
  EXPECT_TRUE(ring.replicas_equal);
  EXPECT_GT(max_abs_diff(two.init_params, two.final_params), 1e-2);  // it did train
  EXPECT_LT(max_abs_diff(ring.final_params, two.final_params), 1e-5);
  // The same bytes per rank in all (2(n-1)/n of each bucket), only fewer of them across.
  EXPECT_EQ(two.stats.bytes_sent, ring.stats.bytes_sent);

  // The default path (the thread transport's own sharded update) agrees too.
  Config plain = tiny_config();
  plain.set("optim.momentum", 0.9);
  plain.set("sync.bucket_kib", int64_t(1));
  const testing::TinyRun flat = run_tiny(plain, 4, 30, 16);
  EXPECT_LT(max_abs_diff(flat.final_params, two.final_params), 1e-5);
}

TEST(TwoLevelTraining, AutoPicksTwoLevelAcrossMachinesAndStaysFlatOnOne) {
  Config cfg = two_by_two("auto");
  cfg.set("comm.small_kib", int64_t(0));  // the tiny buckets are under the default 64 KiB
  const testing::TinyRun across = run_tiny(cfg, 4, 5, 16);
  EXPECT_NE(across.describe.find("two-level (2 machines x 2 ranks)"), std::string::npos)
      << across.describe;
  Config one = tiny_config();
  one.set("comm.small_kib", int64_t(0));
  const testing::TinyRun flat = run_tiny(one, 4, 5, 16);
  EXPECT_EQ(flat.describe.find("two-level"), std::string::npos) << flat.describe;
  EXPECT_NE(flat.describe.find("optimizer sharded"), std::string::npos) << flat.describe;
}

TEST(TwoLevelTraining, OnOneMachineTwoLevelFallsBackToTheFlatPath) {
  Config cfg = tiny_config();
  cfg.set("comm.algorithm", std::string("two-level"));
  const testing::TinyRun r = run_tiny(cfg, 4, 5, 16);
  EXPECT_NE(r.describe.find("comm.algorithm two-level (flat: 1 machine x 4 ranks)"),
            std::string::npos)
      << r.describe;
  EXPECT_NE(r.describe.find("optimizer sharded"), std::string::npos) << r.describe;
}

}  // namespace
}  // namespace loom::sync
