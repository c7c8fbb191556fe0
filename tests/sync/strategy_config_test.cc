// Bad sync/codec/bmuf keys are ConfigErrors naming the key; NaN entering a codec names the
// bucket.
#include <gtest/gtest.h>

#include "loom/comm/transport_registry.h"
#include "loom/comm/world.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/sync/strategy.h"
#include "loom/tensor/backend_registry.h"
#include "tiny_training.h"

namespace loom::sync {
namespace {

// make_strategy on a world of one with cfg (a run of total_steps steps, 0: not known); returns
// the ConfigError's message ("" if none).
std::string config_error(const Config& cfg, int64_t total_steps = 0) {
  auto world = comm::create_world("thread", 1, comm::CommOptions{});
  std::string msg;
  world->run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    auto model = nn::build_model(plan::read_model_spec(cfg), be, {20}, 10);
    auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
    try {
      plan::make_strategy(cfg, c, *model, *opt, total_steps);
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

TEST(StrategyConfig, MomentumCorrectionNeedsOnebitOrTopkAndSgdMomentum) {
  Config cfg = testing::tiny_config();
  cfg.set("sync.momentum_correction", true);
  cfg.set("optim.momentum", 0.9);
  cfg.set("codec", std::string("int8"));
  EXPECT_NE(config_error(cfg).find("sync.momentum_correction"), std::string::npos);
  cfg.set("codec", std::string("topk"));
  EXPECT_EQ(config_error(cfg), "");
  cfg.set("codec", std::string("onebit"));
  EXPECT_EQ(config_error(cfg), "");
  cfg.set("optim.nesterov", true);
  EXPECT_NE(config_error(cfg).find("without Nesterov"), std::string::npos);
  cfg.set("optim.nesterov", false);
  cfg.set("optim.momentum", 0.0);
  EXPECT_NE(config_error(cfg).find("optim.momentum > 0"), std::string::npos);
  // "auto" (the default) turns it on only where it applies: never an error.
  cfg.set("sync.momentum_correction", std::string("auto"));
  for (const char* codec : {"int8", "onebit", "topk"}) {
    cfg.set("codec", std::string(codec));
    EXPECT_EQ(config_error(cfg), "") << codec;
  }
}

// The codec options: negative values, a warm-up as long as the run, and options that do not
// apply to the codec or strategy chosen are ConfigErrors naming the key.
TEST(StrategyConfig, CodecOptionsBadInputNamesTheKey) {
  struct Case {
    std::vector<const char*> sets;
    const char* key;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"codec=\"onebit\"", "codec.warmup_steps=-1"}, "codec.warmup_steps", "out of range"},
      {{"codec=\"onebit\"", "codec.warmup_steps=100"},
       "codec.warmup_steps",
       "not shorter than the run (100 steps)"},
      {{"codec=\"onebit\"", "codec.warmup_steps=250"}, "codec.warmup_steps", "never start"},
      {{"codec.warmup_steps=10"}, "codec.warmup_steps", "codec fp32"},
      {{"codec=\"onebit\"", "sync=\"bmuf\"", "codec.warmup_steps=10"},
       "codec.warmup_steps",
       "sync = \"bmuf\""},
      {{"codec=\"onebit\"", "sync=\"ps\"", "codec.aggregation=\"gather\""},
       "codec.aggregation",
       "sync = \"ps\""},
      {{"codec=\"topk\"", "codec.aggregation=\"stripes\""}, "codec.aggregation", "topk"},
      {{"codec=\"powersgd\"", "codec.aggregation=\"gather\""}, "codec.aggregation", "powersgd"},
      {{"codec=\"onebit\"", "codec.aggregation=\"ring\""}, "codec.aggregation", "ring"},
      {{"codec.aggregation=\"gather\""}, "codec.aggregation", "codec fp32"},
      {{"codec=\"topk\"", "codec.min_bucket_kib=-1"}, "codec.min_bucket_kib", "out of range"},
      {{"codec.min_bucket_kib=64"}, "codec.min_bucket_kib", "codec fp32"},
      {{"codec=\"onebit\"", "sync.momentum_correction=\"maybe\""},
       "sync.momentum_correction",
       "maybe"},
      {{"codec=\"onebit\"", "sync=\"bmuf\"", "sync.momentum_correction=true"},
       "sync.momentum_correction",
       "sync = \"bmuf\""},
      {{"codec=\"onebit\"", "sync.momentum_masking=true"}, "sync.momentum_masking", "topk"},
      {{"codec=\"topk\"", "sync.momentum_correction=false", "sync.momentum_masking=true"},
       "sync.momentum_masking",
       "needs momentum correction"},
  };
  for (const Case& k : cases) {
    Config cfg = testing::tiny_config();
    cfg.set("optim.momentum", 0.9);
    std::string what;
    for (const char* a : k.sets) {
      cfg.set_override(a);
      what += std::string(a) + " ";
    }
    const std::string msg = config_error(cfg, 100);
    EXPECT_NE(msg.find(std::string("'") + k.key + "'"), std::string::npos)
        << what << "-> '" << msg << "'";
    EXPECT_NE(msg.find(k.says), std::string::npos) << what << "-> '" << msg << "'";
    RecordProperty(what, msg);
  }
  // What applies is accepted: a warm-up one step shorter than the run, each default, the
  // values that leave an option out whatever the codec.
  for (const std::vector<const char*>& ok : std::vector<std::vector<const char*>>{
           {"codec=\"onebit\"", "codec.warmup_steps=99"},
           {"codec=\"onebit\""},
           {"codec=\"topk\"", "sync.momentum_masking=true"},
           {"codec=\"int8\"", "codec.aggregation=\"gather\"", "codec.min_bucket_kib=8"},
           {"codec.warmup_steps=0", "codec.aggregation=\"auto\"", "codec.min_bucket_kib=0",
            "sync.momentum_correction=false"},
           {"codec=\"onebit\"", "sync=\"bmuf\""}}) {
    Config cfg = testing::tiny_config();
    cfg.set("optim.momentum", 0.9);
    for (const char* a : ok) cfg.set_override(a);
    EXPECT_EQ(config_error(cfg, 100), "") << ok[0];
  }
}

TEST(StrategyConfig, KeysAreDeclared) {
  std::vector<std::string> want = {"sync",
                                   "bmuf.tau",
                                   "bmuf.eta",
                                   "bmuf.zeta",
                                   "bmuf.nesterov",
                                   "bmuf.reset_momentum",
                                   "codec",
                                   "codec.error_feedback",
                                   "codec.warmup_steps",
                                   "codec.aggregation",
                                   "codec.min_bucket_kib",
                                   "sync.momentum_correction",
                                   "sync.momentum_masking"};
  const auto keys = plan::sync_config_keys();
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
