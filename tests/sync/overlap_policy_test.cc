// The default of sync.overlap: overlap only when every worker on the host has a spare core for
// its communication thread; the key, when set, always wins.
#include "loom/sync/allreduce/overlap_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "loom/comm/transport_registry.h"
#include "loom/comm/world.h"
#include "loom/core/error.h"
#include "loom/plan/sync_reader.h"

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
  EXPECT_FALSE(plan::overlap_from_config(cfg, 2, 4, false));  // 2 x (2 + 1) > 4
  EXPECT_TRUE(plan::overlap_from_config(cfg, 2, 6, false));
  cfg.set("sync.overlap", true);
  EXPECT_TRUE(plan::overlap_from_config(cfg, 2, 4, false));
  cfg.set("sync.overlap", false);
  EXPECT_FALSE(plan::overlap_from_config(cfg, 2, 6, true));
}

// On this host, with the thread transport: the world's size is the workers on the host.
bool overlap_for(const Config& cfg, int workers) {
  auto world = comm::create_world("thread", workers, comm::CommOptions{});
  bool overlap = false;
  world->run([&](comm::Communicator& c) {
    if (c.rank() == 0) overlap = plan::overlap_from_config(cfg, c);
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

// Without the thread: inline unless the config asks for after-backward; "inline" is a setting of
// its own; any other string names the key.
TEST(OverlapPolicy, InlineUnlessAfterBackwardIsAskedFor) {
  Config cfg;
  EXPECT_TRUE(plan::inline_combine_from_config(cfg, false));  // auto, no spare core
  EXPECT_FALSE(plan::inline_combine_from_config(cfg, true));  // auto, the thread
  cfg.set("sync.overlap", false);
  EXPECT_FALSE(plan::inline_combine_from_config(cfg, false));
  cfg.set("sync.overlap", true);
  EXPECT_FALSE(plan::inline_combine_from_config(cfg, true));
  cfg.set("sync.overlap", std::string("inline"));
  EXPECT_FALSE(plan::overlap_from_config(cfg, 1, 64, false));  // no thread, whatever the cores
  EXPECT_TRUE(plan::inline_combine_from_config(cfg, false));
  EXPECT_TRUE(plan::push_during_backward_from_config(cfg));  // the parameter server's reading
  cfg.set("sync.overlap", false);
  EXPECT_FALSE(plan::push_during_backward_from_config(cfg));
  cfg.set("sync.overlap", std::string("sometimes"));
  try {
    plan::overlap_from_config(cfg, 1, 64, false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sync.overlap"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sometimes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::sync
