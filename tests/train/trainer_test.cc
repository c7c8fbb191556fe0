#include "loom/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/tiny_run.h"
#include "loom/core/error.h"

namespace loom::train {
namespace {

using loom::testing::max_abs_diff;
using loom::testing::tiny_run;

TEST(Trainer, ShortRunLowersTheLoss) {
  Config cfg = tiny_run(1, 64, 200);
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
  TrainResult a = run_training(tiny_run(2, 32, 20));
  TrainResult b = run_training(tiny_run(2, 32, 20));
  ASSERT_FALSE(a.final_params.empty());
  EXPECT_EQ(a.final_params, b.final_params);
}

TEST(Trainer, NWorkersOfBatchBEqualOneWorkerOfBatchNB) {
  // Same samples, same dropout masks (they follow the global sample index), same mean
  // gradient; only the order of float additions differs.
  TrainResult one = run_training(tiny_run(1, 64, 20));
  TrainResult two = run_training(tiny_run(2, 32, 20));
  TrainResult four = run_training(tiny_run(4, 16, 20));
  EXPECT_LT(max_abs_diff(one.final_params, two.final_params), 1e-4);
  EXPECT_LT(max_abs_diff(one.final_params, four.final_params), 1e-4);
  // A different seed moves the parameters far more than reassociation does.
  Config other = tiny_run(1, 64, 20);
  other.set("seed", int64_t(1));
  EXPECT_GT(max_abs_diff(one.final_params, run_training(other).final_params), 1e-2);
}

TEST(Trainer, UnshardedAndSequentialPathsAgree) {
  Config base = tiny_run(2, 32, 10);
  base.set("sync.overlap", true);
  TrainResult sharded = run_training(base);
  Config plain = base;
  plain.set("sync.shard_optimizer", false);
  Config serial = base;
  serial.set("sync.overlap", false);
  Config in_backward = base;
  in_backward.set("sync.overlap", std::string("inline"));
  EXPECT_LT(max_abs_diff(sharded.final_params, run_training(plain).final_params), 1e-5);
  EXPECT_EQ(sharded.final_params, run_training(serial).final_params);
  const TrainResult inl = run_training(in_backward);
  EXPECT_EQ(sharded.final_params, inl.final_params);
  // Combined inside backward, all of the exchange is exposed, and it is counted once: as
  // communication, not also as compute (the two are disjoint parts of the loop's time).
  ASSERT_FALSE(inl.epochs.empty());
  const EpochMetrics& m = inl.epochs.back();
  EXPECT_GT(m.comm_s, 0.0);
  EXPECT_GE(m.exposed_comm_s, m.comm_s);
  EXPECT_GT(m.compute_s, 0.0);
  EXPECT_LE(m.compute_s + m.exposed_comm_s, m.seconds * 1.001);
}

TEST(Trainer, BadConfigIsRejectedWithTheKey) {
  Config cfg = tiny_run(1, 64, 1);
  cfg.set("optim.lrr", 0.1);
  try {
    run_training(cfg);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optim.lrr"), std::string::npos) << e.what();
  }
  Config too_many = tiny_run(1, 100000, 1);
  EXPECT_THROW(run_training(too_many), ConfigError);
  Config zero = tiny_run(1, 64, 1);
  zero.set("workers", int64_t(0));
  EXPECT_THROW(run_training(zero), ConfigError);
  // The loop knows the run's length (max_steps here): a codec warm-up as long is refused
  // before any step, naming the key; one step shorter runs.
  Config warm = tiny_run(2, 32, 10);
  warm.set("codec", std::string("onebit"));
  warm.set("codec.warmup_steps", int64_t(10));
  try {
    run_training(warm);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'codec.warmup_steps'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(10 steps)"), std::string::npos) << e.what();
  }
  warm.set("codec.warmup_steps", int64_t(9));
  EXPECT_EQ(run_training(warm).steps, 10);
}

TEST(Trainer, CudaBackendNeedsTheNcclTransportAndNcclTakesPlainAllreduce) {
  auto error_of = [](const Config& cfg) -> std::string {
    try {
      run_training(cfg);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  Config cuda_on_threads = tiny_run(1, 64, 1);
  cuda_on_threads.set("transport", std::string("thread"));
  cuda_on_threads.set("backend", std::string("cuda"));
  EXPECT_NE(error_of(cuda_on_threads).find("'backend'"), std::string::npos);
  Config nccl_cpu = tiny_run(1, 64, 1);
  nccl_cpu.set("transport", std::string("nccl"));
  const std::string e = error_of(nccl_cpu);
  // Built: nccl needs backend = "cuda"; not built: the error names the build option.
  EXPECT_TRUE(e.find("backend = \"cuda\"") != std::string::npos ||
              e.find("LOOM_CUDA=ON") != std::string::npos)
      << e;
  Config nccl_psgd = nccl_cpu;  // PowerSGD has no device kernels
  nccl_psgd.set("backend", std::string("cuda"));
  nccl_psgd.set("codec", std::string("powersgd"));
  const std::string c = error_of(nccl_psgd);
  EXPECT_TRUE(c.find("'codec'") != std::string::npos || c.find("LOOM_CUDA=ON") != std::string::npos)
      << c;
}

TEST(Trainer, DivergingLossStopsNamingTheStep) {
  Config cfg = tiny_run(1, 64, 50);
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
