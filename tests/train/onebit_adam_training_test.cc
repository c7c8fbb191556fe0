// optim.name = "onebit_adam" in whole runs: it trains over 2 thread workers through both stages,
// resumes bit for bit from a checkpoint of either stage, and the combinations it cannot honour
// are ConfigErrors naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using ::testing::HasSubstr;

// 2 workers x batch 2048: 14 steps per Fashion-MNIST epoch, 28 in two; with 1-bit Adam the
// variance freezes after step 8. `optimizer`: "onebit_adam", or "adamw" for the same run with
// AdamW (fp32 unless a codec is set).
Config onebit_adam_run(const std::string& out, const std::string& optimizer = "onebit_adam") {
  Config cfg;
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(2048));
  cfg.set("epochs", int64_t(2));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("error"));
  cfg.set("output.dir", out);
  cfg.set_override("mlp.hidden=[32, 16]");
  cfg.set("optim.lr", 0.003);
  if (optimizer == "adamw") {
    cfg.set("optim.name", std::string("adam"));
    cfg.set("optim.decoupled", true);
  } else {
    cfg.set("optim.name", optimizer);
    cfg.set("codec.warmup_steps", int64_t(8));
  }
  cfg.set("train.checkpoint_every", int64_t(5));
  cfg.set("train.checkpoint_keep", int64_t(10));
  return cfg;
}

// The paper's claim in miniature: 1-bit Adam ends where AdamW on exact sums does, much nearer
// than Adam fed 1-bit gradients with error feedback, and after its warm-up it sends the 1-bit
// codec's bytes.
TEST(OnebitAdamTraining, TrainsLikeAdamWAndSendsOneBit) {
  TempDir dir;
  const TrainResult r = run_training(plan::read_run_plan(onebit_adam_run(dir.path())));
  ASSERT_EQ(r.steps, 28);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_THAT(r.describe, HasSubstr("1-bit Adam"));
  EXPECT_THAT(r.describe, HasSubstr("onebit"));  // the codec it took without being told
  TempDir adamw_dir, grads_dir;
  const Config adamw = onebit_adam_run(adamw_dir.path(), "adamw");
  Config onebit_grads = adamw;
  onebit_grads.set("output.dir", grads_dir.path());
  onebit_grads.set("codec", std::string("onebit"));
  const TrainResult exact = run_training(plan::read_run_plan(adamw));
  const TrainResult grads = run_training(plan::read_run_plan(onebit_grads));
  const double ours = r.epochs[1].train_loss, want = exact.epochs[1].train_loss;
  EXPECT_LT(ours, r.epochs[0].train_loss);
  EXPECT_LT(std::abs(ours - want), std::abs(grads.epochs[1].train_loss - want))
      << "1-bit Adam " << ours << ", AdamW " << want << ", Adam on 1-bit gradients "
      << grads.epochs[1].train_loss;
  // The second epoch is all in the frozen stage: the 1-bit codec's bytes, not fp32's.
  EXPECT_EQ(r.epochs[1].bytes_sent, grads.epochs[1].bytes_sent);
  EXPECT_LT(r.epochs[1].bytes_sent * 8, exact.epochs[1].bytes_sent);
}

TEST(OnebitAdamTraining, ResumesBitForBitFromEitherStage) {
  TempDir dir;
  const Config cfg = onebit_adam_run(dir.path());
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const fs::path ck = fs::path(dir.path()) / "checkpoints";
  for (int s : {5, 15}) {  // in the Adam stage, and in the frozen one
    Config again = cfg;
    again.set("train.resume", (ck / checkpoint_name(s)).string());
    EXPECT_EQ(run_training(plan::read_run_plan(again)).final_params, full.final_params) << s;
  }
  const CheckpointFile f =
      CheckpointFile::read((ck / checkpoint_name(15) / "rank-00000.ckpt").string());
  EXPECT_TRUE(f.has("strategy.f.bucket0.worker0.residual"));
}

TEST(OnebitAdamTraining, AnAdamCheckpointDoesNotResumeAsOnebitAdam) {
  TempDir dir;
  Config adam = onebit_adam_run(dir.path(), "adamw");
  adam.set("codec", std::string("onebit"));
  adam.set("epochs", int64_t(1));
  run_training(plan::read_run_plan(adam));
  Config one = onebit_adam_run(dir.path());
  one.set("train.resume", (fs::path(dir.path()) / "checkpoints" / checkpoint_name(10)).string());
  try {
    run_training(plan::read_run_plan(one));
    FAIL() << "an Adam checkpoint resumed as 1-bit Adam";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("onebit_adam_m"));
  }
}

// Every combination 1-bit Adam cannot honour is refused before anything trains, naming the key.
TEST(OnebitAdamTraining, WhatItCannotHonourIsAConfigErrorNamingTheKey) {
  TempDir dir;
  struct Case {
    const char* set;
    const char* message;
  };
  const Case cases[] = {
      {"codec=\"fp32\"", "key 'codec'"},
      {"sync=\"bmuf\"", "key 'sync'"},
      {"sync=\"ps\"", "key 'sync'"},
      {"codec=\"auto\"", "do not weigh optim.name = \"onebit_adam\""},
      {"optim.clip_norm=1.0", "key 'optim.clip_norm'"},
      {"codec.warmup_steps=0", "key 'codec.warmup_steps'"},
      {"codec.warmup_steps=28", "key 'codec.warmup_steps'"},  // no frozen step left
      {"optim.decoupled=false", "key 'optim.decoupled'"},
  };
  for (const Case& c : cases) {
    Config cfg = onebit_adam_run(dir.path());
    cfg.set_override(c.set);
    try {
      run_training(plan::read_run_plan(cfg));
      ADD_FAILURE() << c.set << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.set;
    }
    EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "summary.json")) << c.set;
  }
}

}  // namespace
}  // namespace loom::train
