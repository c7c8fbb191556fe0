// comm.algorithm = "two-level" reaches the allreduce strategy: 4 workers on the thread transport
// with machines of 2 ranks faked (comm.ranks_per_node) train the same parameters as the flat
// ring to float rounding (the sums are associated differently: inside machines first), sharded
// or not, clipped or not; every replica ends with the same bits, and the strategy says which
// algorithm carries its buckets. Codecs run two-level too (fp32 inside machines, the codec across
// them): the identity codec gives the plain two-level result, lossy codecs train.
#include <gtest/gtest.h>

#include <string>

#include "loom/compress/identity_codec.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
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
  Config unsharded_cfg = two_by_two("two-level");
  unsharded_cfg.set("sync.shard_optimizer", false);
  const testing::TinyRun unsharded = run_tiny(unsharded_cfg, 4, 30, 16);
  const testing::TinyRun two = run_tiny(two_by_two("two-level"), 4, 30, 16);
  EXPECT_NE(ring.describe.find("comm.algorithm ring"), std::string::npos) << ring.describe;
  EXPECT_NE(unsharded.describe.find("two-level (2 machines x 2 ranks)"), std::string::npos)
      << unsharded.describe;
  EXPECT_EQ(unsharded.describe.find("optimizer sharded"), std::string::npos) << unsharded.describe;
  // Sharded by default, as on the flat path: reduce-scatter and allgather in two levels.
  EXPECT_NE(two.describe.find("optimizer sharded (two-level)"), std::string::npos) << two.describe;
  for (const testing::TinyRun* r : {&ring, &unsharded, &two}) {
    EXPECT_TRUE(r->replicas_equal) << r->describe;
    EXPECT_GT(max_abs_diff(r->init_params, r->final_params), 1e-2);  // it did train
    EXPECT_LT(max_abs_diff(ring.final_params, r->final_params), 1e-5) << r->describe;
  }
  // The same bytes per rank in all (2(n-1)/n of each bucket), only fewer of them across; the
  // sharded update's blocks are cut in two levels, so its counts differ by the remainders.
  EXPECT_EQ(unsharded.stats.bytes_sent, ring.stats.bytes_sent);
  EXPECT_NEAR(double(two.stats.bytes_sent), double(ring.stats.bytes_sent),
              0.01 * double(ring.stats.bytes_sent));

  // The default path (the thread transport's own sharded update) agrees too.
  Config plain = tiny_config();
  plain.set("optim.momentum", 0.9);
  plain.set("sync.bucket_kib", int64_t(1));
  const testing::TinyRun flat = run_tiny(plain, 4, 30, 16);
  EXPECT_LT(max_abs_diff(flat.final_params, two.final_params), 1e-5);
}

TEST(TwoLevelTraining, ShardedTwoLevelClipsLikeTheFlatRing) {
  // With clipping the update waits for the global norm: each rank sums the squares of the
  // block it owns after the two-level reduce-scatter.
  Config ring_cfg = two_by_two("ring");
  ring_cfg.set("sync.shard_optimizer", false);
  ring_cfg.set("optim.clip_norm", 0.05);
  Config two_cfg = two_by_two("two-level");
  two_cfg.set("optim.clip_norm", 0.05);
  const testing::TinyRun ring = run_tiny(ring_cfg, 4, 20, 16);
  const testing::TinyRun two = run_tiny(two_cfg, 4, 20, 16);
  EXPECT_NE(two.describe.find("optimizer sharded (two-level)"), std::string::npos) << two.describe;
  EXPECT_TRUE(two.replicas_equal);
  EXPECT_LT(max_abs_diff(ring.final_params, two.final_params), 1e-5);
  // A lower clip norm than the gradients' changes the result: the clip took effect.
  Config unclipped = two_by_two("two-level");
  EXPECT_GT(max_abs_diff(run_tiny(unclipped, 4, 20, 16).final_params, two.final_params), 1e-3);
}

TEST(TwoLevelTraining, IdentityCodecTwoLevelEqualsThePlainTwoLevel) {
  Config cfg = two_by_two("two-level");
  cfg.set("sync.shard_optimizer", false);
  const testing::TinyRun plain = run_tiny(cfg, 4, 30, 16);
  const testing::TinyRun coded =
      run_tiny(cfg, 4, 30, 16, [](comm::Communicator& c, nn::Model& m, optim::Optimizer& o) {
        AllreduceOptions opts;
        opts.codec = std::make_shared<compress::IdentityCodec>();
        opts.bucket_bytes = 1024;
        return std::make_unique<AllreduceStrategy>(c, m, o, opts);
      });
  EXPECT_NE(coded.describe.find("two-level (2 machines x 2 ranks), codec across machines only"),
            std::string::npos)
      << coded.describe;
  EXPECT_TRUE(coded.replicas_equal);
  EXPECT_GT(max_abs_diff(coded.init_params, coded.final_params), 1e-2);
  // At two machines the cross-machine sum is one addition either way: the same bits.
  EXPECT_EQ(plain.final_params, coded.final_params);
}

TEST(TwoLevelTraining, LossyCodecsTrainTwoLevel) {
  for (const std::string codec : {"int8", "onebit", "topk"}) {
    Config cfg = two_by_two("two-level");
    cfg.set("codec", codec);
    Config flat_cfg = two_by_two("ring");
    flat_cfg.set("codec", codec);
    const testing::TinyRun two = run_tiny(cfg, 4, 60, 16);
    const testing::TinyRun flat = run_tiny(flat_cfg, 4, 60, 16);
    EXPECT_NE(two.describe.find("codec across machines only"), std::string::npos) << two.describe;
    EXPECT_EQ(flat.describe.find("two-level"), std::string::npos) << flat.describe;
    EXPECT_TRUE(two.replicas_equal) << codec;
    // It learns: the loss of the last steps well under the first's (10 classes: ln 10 = 2.3).
    EXPECT_LT(two.mean_loss(50, 60), 0.7 * two.mean_loss(0, 5)) << codec;
    // And about as well as the flat exchange of the same codec.
    EXPECT_LT(two.mean_loss(50, 60), flat.mean_loss(50, 60) + 0.15) << codec;
  }
}

TEST(TwoLevelTraining, PowerSgdKeepsTheFlatExchangeAndSaysWhy) {
  Config cfg = two_by_two("two-level");
  cfg.set("codec", std::string("powersgd"));
  const testing::TinyRun r = run_tiny(cfg, 4, 3, 16);
  EXPECT_NE(r.describe.find("codec buckets flat (powersgd factors whole matrices"),
            std::string::npos)
      << r.describe;
  EXPECT_TRUE(r.replicas_equal);
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
