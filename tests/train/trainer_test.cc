#include "loom/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"

namespace loom::train {
namespace {

using loom::testing::max_abs_diff;
using loom::testing::tiny_run;

TEST(Trainer, ShortRunLowersTheLoss) {
  Config cfg = tiny_run(1, 64, 200);
  cfg.set("eval", true);
  cfg.set("mlp.dropout", 0.0);
  TrainResult r = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.steps, 200);
  // Untrained loss is ln(10) = 2.30; 200 steps of SGD bring the epoch's mean well below.
  EXPECT_LT(r.epochs[0].train_loss, 1.0);
  EXPECT_GT(r.test_acc, 0.70);
}

TEST(Trainer, SameSeedSameBits) {
  TrainResult a = run_training(plan::read_run_plan(tiny_run(2, 32, 20)));
  TrainResult b = run_training(plan::read_run_plan(tiny_run(2, 32, 20)));
  ASSERT_FALSE(a.final_params.empty());
  EXPECT_EQ(a.final_params, b.final_params);
}

TEST(Trainer, NWorkersOfBatchBEqualOneWorkerOfBatchNB) {
  // Same samples, same dropout masks (they follow the global sample index), same mean
  // gradient; only the order of float additions differs.
  TrainResult one = run_training(plan::read_run_plan(tiny_run(1, 64, 20)));
  TrainResult two = run_training(plan::read_run_plan(tiny_run(2, 32, 20)));
  TrainResult four = run_training(plan::read_run_plan(tiny_run(4, 16, 20)));
  EXPECT_LT(max_abs_diff(one.final_params, two.final_params), 1e-4);
  EXPECT_LT(max_abs_diff(one.final_params, four.final_params), 1e-4);
  // A different seed moves the parameters far more than reassociation does.
  Config other = tiny_run(1, 64, 20);
  other.set("seed", int64_t(1));
  EXPECT_GT(max_abs_diff(one.final_params, run_training(plan::read_run_plan(other)).final_params),
            1e-2);
}

// A graph with BatchNorm and a residual Add, then dense layers (kTinyResidualGraph):
// parallel = "hybrid" keeps the graph data-parallel and splits the dense chain at its end over
// the workers. The math is the data-parallel run's, up to the order of float additions: the
// graph part's parameters agree.
// parallel = "model" needs a chain and is refused naming the layer that joins branches.
TEST(Trainer, HybridParallelismOnAGraph) {
  auto run = [&](const std::string& parallel) {
    Config cfg = loom::testing::with_tiny_residual_graph(tiny_run(2, 32, 12));
    cfg.set("parallel", parallel);
    return run_training(plan::read_run_plan(cfg));
  };
  const TrainResult data = run("data");
  const TrainResult hybrid = run("hybrid");
  const size_t graph_params = 204;  // kTinyResidualGraph's part before the dense layers
  ASSERT_GT(hybrid.final_params.size(), graph_params);
  const std::vector<float> a(data.final_params.begin(), data.final_params.begin() + graph_params);
  const std::vector<float> b(hybrid.final_params.begin(),
                             hybrid.final_params.begin() + graph_params);
  EXPECT_LT(max_abs_diff(a, b), 1e-4);
  EXPECT_GT(max_abs_diff(a, std::vector<float>(graph_params, 0.0f)), 1e-2);  // it trained
  EXPECT_LT(max_abs_diff(data.final_state, hybrid.final_state), 1e-4);  // BatchNorm's statistics
  try {
    run("model");
    ADD_FAILURE() << "parallel = model on a graph";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'join'"), std::string::npos) << e.what();
  }
}

TEST(Trainer, UnshardedAndSequentialPathsAgree) {
  Config base = tiny_run(2, 32, 10);
  base.set("sync.overlap", true);
  TrainResult sharded = run_training(plan::read_run_plan(base));
  Config plain = base;
  plain.set("sync.shard_optimizer", false);
  Config serial = base;
  serial.set("sync.overlap", false);
  Config in_backward = base;
  in_backward.set("sync.overlap", std::string("inline"));
  EXPECT_LT(
      max_abs_diff(sharded.final_params, run_training(plan::read_run_plan(plain)).final_params),
      1e-5);
  EXPECT_EQ(sharded.final_params, run_training(plan::read_run_plan(serial)).final_params);
  const TrainResult inl = run_training(plan::read_run_plan(in_backward));
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
    run_training(plan::read_run_plan(cfg));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optim.lrr"), std::string::npos) << e.what();
  }
  Config too_many = tiny_run(1, 100000, 1);
  EXPECT_THROW(run_training(plan::read_run_plan(too_many)), ConfigError);
  Config zero = tiny_run(1, 64, 1);
  zero.set("workers", int64_t(0));
  EXPECT_THROW(run_training(plan::read_run_plan(zero)), ConfigError);
  // The loop knows the run's length (max_steps here): a codec warm-up as long is refused
  // before any step, naming the key; one step shorter runs.
  Config warm = tiny_run(2, 32, 10);
  warm.set("codec", std::string("onebit"));
  warm.set("codec.warmup_steps", int64_t(10));
  try {
    run_training(plan::read_run_plan(warm));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'codec.warmup_steps'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(10 steps)"), std::string::npos) << e.what();
  }
  warm.set("codec.warmup_steps", int64_t(9));
  EXPECT_EQ(run_training(plan::read_run_plan(warm)).steps, 10);
}

TEST(Trainer, CudaBackendNeedsTheNcclTransportAndNcclTakesPlainAllreduce) {
  auto error_of = [](const Config& cfg) -> std::string {
    try {
      run_training(plan::read_run_plan(cfg));
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
    run_training(plan::read_run_plan(cfg));
    FAIL();
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("at step"), std::string::npos) << e.what();
  }
}

// train.accumulate = k: k micro-batches of `batch`, one synchronisation. The loader hands out
// the k x batch step, each micro-batch keeps its samples' global offsets (so dropout draws
// the same masks) and the gradients are summed before the strategy sees them: the run
// matches batch k x batch up to the order of float additions, with every strategy.
TEST(Trainer, AccumulationMatchesTheLargerBatchWithEveryStrategy) {
  struct Case {
    const char* name;
    int workers;
    std::vector<std::string> overrides;
  };
  const std::vector<Case> cases = {
      {"one worker", 1, {}},
      {"allreduce, sharded optimizer", 2, {}},
      {"allreduce, unsharded", 2, {"sync.shard_optimizer=false"}},
      {"allreduce after backward", 2, {"sync.overlap=false"}},
      {"allreduce, int8 codec", 2, {"codec=\"int8\""}},
      {"bmuf", 2, {"sync=\"bmuf\"", "bmuf.tau=3"}},
      {"parameter server", 2, {"sync=\"ps\"", "ps.servers=1"}},
      {"model parallel", 2, {"parallel=\"model\"", "mlp.hidden=[33, 16]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Config big = tiny_run(c.workers, 48, 9);
    for (const std::string& o : c.overrides) big.set_override(o);
    Config small = big;
    small.set("batch", int64_t(12));
    small.set("train.accumulate", int64_t(4));
    const TrainResult a = run_training(plan::read_run_plan(big)),
                      b = run_training(plan::read_run_plan(small));
    ASSERT_EQ(b.steps, 9);
    // The int8 codec rounds the sums it sends: a last-bit difference in the gradient can move
    // a quantised value by one level.
    const double tol = std::string(c.name).find("int8") != std::string::npos ? 1e-3 : 1e-5;
    EXPECT_LT(max_abs_diff(a.final_params, b.final_params), tol);
    ASSERT_EQ(a.epochs.size(), 1u);
    ASSERT_EQ(b.epochs.size(), 1u);
    EXPECT_EQ(a.epochs[0].exchanges, b.epochs[0].exchanges);
    EXPECT_NEAR(a.epochs[0].train_loss, b.epochs[0].train_loss, 1e-5);
  }
}

TEST(Trainer, AccumulationExchangesOncePerKMicroBatches) {
  data::testing::TempDir dir;
  Config every = tiny_run(2, 16, 24);
  Config accumulated = every;
  accumulated.set("max_steps", int64_t(6));
  accumulated.set("train.accumulate", int64_t(4));
  accumulated.set("output.dir", dir.path());
  const TrainResult e = run_training(plan::read_run_plan(every)),
                    a = run_training(plan::read_run_plan(accumulated));
  // 24 micro-batches of 2 x 16 samples either way: 24 exchanges, or 6.
  ASSERT_EQ(e.epochs.size(), 1u);
  ASSERT_EQ(a.epochs.size(), 1u);
  EXPECT_EQ(e.epochs[0].exchanges, 24);
  EXPECT_EQ(a.epochs[0].exchanges, 6);
  // metrics.jsonl: exchanges per sample, 1 / (2 x 16 x 4).
  std::ifstream in(std::filesystem::path(dir.path()) / "metrics.jsonl");
  std::string line;
  nlohmann::json j;
  while (std::getline(in, line)) {
    nlohmann::json l = nlohmann::json::parse(line);
    if (l.value("kind", "") == "epoch") j = l;
  }
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("exchanges").get<int64_t>(), 6);
  EXPECT_DOUBLE_EQ(j.at("exchanges_per_sample").get<double>(), 1.0 / 128.0);
}

TEST(Trainer, AccumulateBelowOneIsRejectedWithTheKey) {
  for (int64_t k : {0, -2}) {
    Config cfg = tiny_run(1, 64, 1);
    cfg.set("train.accumulate", k);
    try {
      run_training(plan::read_run_plan(cfg));
      FAIL() << k;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("train.accumulate"), std::string::npos) << e.what();
    }
  }
}

// optim.clip_norm scales the combined gradient (the mean over all workers) to the norm: a
// single worker with the whole batch is the reference for every path of the allreduce
// strategy (sharded or not, combined on the thread, inline or after backward, accumulated).
TEST(Trainer, ClippingMatchesASingleWorkerReference) {
  const double clip = 0.05;  // below the gradient's norm on most steps: the clip is active
  Config one = tiny_run(1, 64, 12);
  const std::vector<float> unclipped = run_training(plan::read_run_plan(one)).final_params;
  one.set("optim.clip_norm", clip);
  const TrainResult reference = run_training(plan::read_run_plan(one));
  EXPECT_GT(max_abs_diff(reference.final_params, unclipped), 1e-3);
  struct Case {
    const char* name;
    int workers, batch;
    std::vector<std::string> overrides;
  };
  const std::vector<Case> cases = {
      {"sharded optimizer", 2, 32, {}},
      {"sharded, 4 workers, small buckets", 4, 16, {"sync.bucket_kib=16"}},
      {"unsharded", 2, 32, {"sync.shard_optimizer=false"}},
      {"after backward", 2, 32, {"sync.overlap=false"}},
      {"inline", 2, 32, {"sync.overlap=\"inline\""}},
      {"accumulated", 2, 16, {"train.accumulate=2"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Config cfg = tiny_run(c.workers, c.batch, 12);
    cfg.set("optim.clip_norm", clip);
    for (const std::string& o : c.overrides) cfg.set_override(o);
    EXPECT_LT(
        max_abs_diff(reference.final_params, run_training(plan::read_run_plan(cfg)).final_params),
        1e-4);
  }
}

// With a lossy codec the clipped gradient is the decoded combined one, the gradient the
// optimizer applies: one plain SGD step moves the parameters by exactly lr x clip_norm. Two
// runs with clip norms c and 2c start from the same parameters and decode the same gradient,
// so their parameters differ by lr x c.
TEST(Trainer, ClippingBoundsTheDecodedStepWithEveryCodec) {
  for (const char* codec : {"fp16", "bf16", "int8", "onebit", "topk", "powersgd"}) {
    SCOPED_TRACE(codec);
    Config cfg = tiny_run(2, 32, 1);
    cfg.set("codec", std::string(codec));
    cfg.set("optim.momentum", 0.0);
    cfg.set("optim.lr", 1.0);
    cfg.set("optim.clip_norm", 0.01);
    const std::vector<float> a = run_training(plan::read_run_plan(cfg)).final_params;
    cfg.set("optim.clip_norm", 0.02);
    const std::vector<float> b = run_training(plan::read_run_plan(cfg)).final_params;
    ASSERT_EQ(a.size(), b.size());
    double sq = 0;
    for (size_t i = 0; i < a.size(); ++i) sq += double(a[i] - b[i]) * double(a[i] - b[i]);
    EXPECT_NEAR(std::sqrt(sq), 0.01, 1e-4);
  }
}

TEST(Trainer, ClipNormMustBePositiveAndNeedsTheAllreduceStrategy) {
  auto error_of = [](const Config& cfg) {
    try {
      run_training(plan::read_run_plan(cfg));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (double c : {0.0, -1.0}) {
    Config cfg = tiny_run(1, 64, 1);
    cfg.set("optim.clip_norm", c);
    EXPECT_NE(error_of(cfg).find("optim.clip_norm"), std::string::npos) << c;
  }
  for (const char* sync : {"bmuf", "ps"}) {
    Config cfg = tiny_run(2, 32, 1);
    cfg.set("sync", std::string(sync));
    cfg.set("optim.clip_norm", 1.0);
    EXPECT_NE(error_of(cfg).find("optim.clip_norm"), std::string::npos) << sync;
  }
}

}  // namespace
}  // namespace loom::train
