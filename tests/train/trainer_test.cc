#include "loom/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"

namespace loom::train {
namespace {

Config small_run(int workers, int batch, int steps) {
  Config cfg;
  cfg.set("workers", int64_t(workers));
  cfg.set("batch", int64_t(batch));
  cfg.set("max_steps", int64_t(steps));
  cfg.set("epochs", int64_t(1));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("output.dir", std::string(""));
  cfg.set_override("mlp.hidden=[64, 32]");
  return cfg;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(Trainer, ShortRunLowersTheLoss) {
  Config cfg = small_run(1, 64, 200);
  cfg.set("eval", true);
  cfg.set("mlp.dropout", 0.0);
  TrainResult r = run_training(cfg);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.steps, 200);
  // Untrained loss is ln(10) = 2.30; 200 steps of SGD bring the epoch's mean well below.
  EXPECT_LT(r.epochs[0].train_loss, 1.0);
  EXPECT_GT(r.test_acc, 0.70);
}

TEST(Trainer, SameSeedSameBits) {
  TrainResult a = run_training(small_run(2, 32, 20));
  TrainResult b = run_training(small_run(2, 32, 20));
  ASSERT_FALSE(a.final_params.empty());
  EXPECT_EQ(a.final_params, b.final_params);
}

TEST(Trainer, NWorkersOfBatchBEqualOneWorkerOfBatchNB) {
  // Same samples, same dropout masks (they follow the global sample index), same mean
  // gradient; only the order of float additions differs.
  TrainResult one = run_training(small_run(1, 64, 20));
  TrainResult two = run_training(small_run(2, 32, 20));
  TrainResult four = run_training(small_run(4, 16, 20));
  EXPECT_LT(max_abs_diff(one.final_params, two.final_params), 1e-4);
  EXPECT_LT(max_abs_diff(one.final_params, four.final_params), 1e-4);
  // A different seed moves the parameters far more than reassociation does.
  Config other = small_run(1, 64, 20);
  other.set("seed", int64_t(1));
  EXPECT_GT(max_abs_diff(one.final_params, run_training(other).final_params), 1e-2);
}

TEST(Trainer, UnshardedAndSequentialPathsAgree) {
  Config base = small_run(2, 32, 10);
  TrainResult sharded = run_training(base);
  Config plain = base;
  plain.set("sync.shard_optimizer", false);
  Config serial = base;
  serial.set("sync.overlap", false);
  EXPECT_LT(max_abs_diff(sharded.final_params, run_training(plain).final_params), 1e-5);
  EXPECT_EQ(sharded.final_params, run_training(serial).final_params);
}

TEST(Trainer, BadConfigIsRejectedWithTheKey) {
  Config cfg = small_run(1, 64, 1);
  cfg.set("optim.lrr", 0.1);
  try {
    run_training(cfg);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optim.lrr"), std::string::npos) << e.what();
  }
  Config too_many = small_run(1, 100000, 1);
  EXPECT_THROW(run_training(too_many), ConfigError);
  Config zero = small_run(1, 64, 1);
  zero.set("workers", int64_t(0));
  EXPECT_THROW(run_training(zero), ConfigError);
}

TEST(Trainer, DivergingLossStopsNamingTheStep) {
  Config cfg = small_run(1, 64, 50);
  cfg.set("optim.lr", 500.0);
  try {
    run_training(cfg);
    FAIL();
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("at step"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::train
