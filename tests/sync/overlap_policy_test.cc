// The default of sync.overlap: overlap only when every worker on the host has a spare core for
// its communication thread; the key, when set, always wins.
#include "loom/sync/overlap_policy.h"

#include <gtest/gtest.h>

#include <thread>

#include "loom/comm/transport_registry.h"
#include "loom/comm/world.h"

namespace loom::sync {
namespace {

TEST(OverlapPolicy, OverlapsOnlyWithASpareCorePerWorker) {
  EXPECT_TRUE(default_overlap(1, 1, 2, false));   // 1 worker + its comm thread on 2 cores
  EXPECT_FALSE(default_overlap(2, 1, 2, false));  // 2 workers fill 2 cores
  EXPECT_TRUE(default_overlap(2, 1, 4, false));
  EXPECT_FALSE(default_overlap(2, 2, 4, false));  // 2 x (2 + 1) > 4
  EXPECT_TRUE(default_overlap(2, 2, 6, false));
  EXPECT_TRUE(default_overlap(8, 8, 2, true));   // a device transport communicates on the GPU
  EXPECT_TRUE(default_overlap(2, 1, 0, false));  // cores unknown: keep overlap
}

TEST(OverlapPolicy, ConfigThreadsCountAndTheKeyWins) {
  Config cfg;
  cfg.set("threads", int64_t(2));
  EXPECT_FALSE(overlap_from_config(cfg, 2, 4, false));  // 2 x (2 + 1) > 4
  EXPECT_TRUE(overlap_from_config(cfg, 2, 6, false));
  cfg.set("sync.overlap", true);
  EXPECT_TRUE(overlap_from_config(cfg, 2, 4, false));
  cfg.set("sync.overlap", false);
  EXPECT_FALSE(overlap_from_config(cfg, 2, 6, true));
}

// On this host, with the thread transport: the world's size is the workers on the host.
bool overlap_for(const Config& cfg, int workers) {
  auto world = comm::create_world("thread", workers, comm::CommOptions{});
  bool overlap = false;
  world->run([&](comm::Communicator& c) {
    if (c.rank() == 0) overlap = overlap_from_config(cfg, c);
  });
  return overlap;
}

TEST(OverlapPolicy, TheKeyWinsElseTheHostDecides) {
  const int cores = int(std::thread::hardware_concurrency());
  Config cfg;
  cfg.set("threads", int64_t(1));
  EXPECT_EQ(overlap_for(cfg, 2), 2 * 2 <= cores);
  EXPECT_EQ(overlap_for(cfg, 1), 2 <= cores);
  cfg.set("sync.overlap", true);
  EXPECT_TRUE(overlap_for(cfg, 2));
  cfg.set("sync.overlap", false);
  EXPECT_FALSE(overlap_for(cfg, 1));
}

}  // namespace
}  // namespace loom::sync
