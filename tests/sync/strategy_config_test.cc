// Bad sync/codec/bmuf keys are ConfigErrors naming the key; NaN entering a codec names the
// bucket.
#include <gtest/gtest.h>

#include "loom/comm/transport_registry.h"
#include "loom/comm/world.h"
#include "loom/core/error.h"
#include "loom/nn/model_zoo.h"
#include "loom/sync/strategy.h"
#include "loom/tensor/backend_registry.h"
#include "tiny_training.h"

namespace loom::sync {
namespace {

// make_strategy on a world of one with cfg; returns the ConfigError's message ("" if none).
std::string config_error(const Config& cfg) {
  auto world = comm::create_world("thread", 1, comm::CommOptions{});
  std::string msg;
  world->run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    auto model = nn::build_model(cfg, be, {20}, 10);
    auto opt = optim::make_optimizer(cfg, be, model->num_params());
    try {
      make_strategy(cfg, c, *model, *opt);
    } catch (const ConfigError& e) {
      msg = e.what();
    }
  });
  return msg;
}

TEST(StrategyConfig, BadKeysNameTheKey) {
  struct Case {
    const char* assignment;
    const char* key;
  };
  for (const Case& k : {Case{"sync=\"gossip\"", "sync"}, Case{"codec=\"int9\"", "codec"},
                        Case{"codec.topk_fraction=0.0", "codec.topk_fraction"},
                        Case{"codec.powersgd_rank=0", "codec.powersgd_rank"},
                        Case{"codec.int8_block=100", "codec.int8_block"},
                        Case{"bmuf.tau=0", "bmuf.tau"}, Case{"bmuf.eta=1.0", "bmuf.eta"},
                        Case{"bmuf.eta=-0.1", "bmuf.eta"}, Case{"bmuf.zeta=0.0", "bmuf.zeta"}}) {
    Config cfg = testing::tiny_config();
    cfg.set_override(k.assignment);
    // Parameters are checked whichever codec/strategy they belong to is chosen.
    if (std::string(k.key).rfind("codec.", 0) == 0) {
      const std::string name = std::string(k.key) == "codec.topk_fraction"   ? "topk"
                               : std::string(k.key) == "codec.powersgd_rank" ? "powersgd"
                                                                             : "int8";
      cfg.set("codec", name);
    }
    if (std::string(k.key).rfind("bmuf.", 0) == 0) cfg.set("sync", std::string("bmuf"));
    const std::string msg = config_error(cfg);
    EXPECT_NE(msg.find(k.key), std::string::npos) << k.assignment << " -> '" << msg << "'";
    RecordProperty(k.assignment, msg);
  }
  EXPECT_EQ(config_error(testing::tiny_config()), "");
}

TEST(StrategyConfig, MomentumCorrectionNeedsTopkAndSgdMomentum) {
  Config cfg = testing::tiny_config();
  cfg.set("sync.momentum_correction", true);
  cfg.set("optim.momentum", 0.9);
  cfg.set("codec", std::string("int8"));
  EXPECT_NE(config_error(cfg).find("sync.momentum_correction"), std::string::npos);
  cfg.set("codec", std::string("topk"));
  EXPECT_EQ(config_error(cfg), "");
  cfg.set("optim.momentum", 0.0);
  EXPECT_NE(config_error(cfg).find("optim.momentum > 0"), std::string::npos);
}

TEST(StrategyConfig, KeysAreDeclared) {
  std::vector<std::string> want = {"sync",          "bmuf.tau",
                                   "bmuf.eta",      "bmuf.zeta",
                                   "bmuf.nesterov", "bmuf.reset_momentum",
                                   "codec",         "codec.error_feedback"};
  const auto keys = sync_config_keys();
  for (const auto& w : want) {
    bool found = false;
    for (const auto& k : keys) found = found || k.key == w;
    EXPECT_TRUE(found) << w;
  }
}

TEST(StrategyConfig, NonFiniteGradientIsReportedWithTheBucket) {
  Config cfg = testing::tiny_config();
  cfg.set("codec", std::string("onebit"));
  cfg.set("optim.lr", 1e30);  // the first update overflows the weights; the next step's
                              // gradients are then NaN and reach the codec
  try {
    testing::run_tiny(cfg, 2, 4, 8);
    FAIL() << "no error";
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("bucket 0"), std::string::npos) << e.what();
    RecordProperty("message", e.what());
  }
}

}  // namespace
}  // namespace loom::sync
