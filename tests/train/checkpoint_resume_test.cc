// Exact resume over the thread transport, the NaN policies, stop signals and a full disk.
#include <gtest/gtest.h>

#include <bit>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/signals.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

// 2 workers x batch 2048: 14 steps per Fashion-MNIST epoch, so two epochs are 28 short steps.
Config run_config(const std::string& out) {
  Config cfg;
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(2048));
  cfg.set("epochs", int64_t(2));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("error"));
  cfg.set("output.dir", out);
  cfg.set_override("mlp.hidden=[32, 16]");
  cfg.set("train.checkpoint_every", int64_t(5));
  cfg.set("train.checkpoint_keep", int64_t(10));
  return cfg;
}

std::vector<float> resume_from(Config cfg, const std::string& from) {
  cfg.set("train.resume", from);
  return run_training(plan::read_run_plan(cfg)).final_params;
}

TEST(CheckpointResume, ResumedRunsReachTheSameBits) {
  TempDir dir;
  const Config cfg = run_config(dir.path());
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(full.steps, 28);
  const fs::path ck = fs::path(dir.path()) / "checkpoints";
  for (int s : {5, 10, 15, 20, 25}) EXPECT_TRUE(fs::exists(ck / checkpoint_name(s))) << s;
  // Mid-epoch 1, mid-epoch 2 (after the boundary at 14), and the newest (via the run dir).
  EXPECT_EQ(resume_from(cfg, (ck / checkpoint_name(10)).string()), full.final_params);
  EXPECT_EQ(resume_from(cfg, (ck / checkpoint_name(15)).string()), full.final_params);
  EXPECT_EQ(find_latest_checkpoint(dir.path()), (ck / checkpoint_name(25)).string());
  EXPECT_EQ(resume_from(cfg, dir.path()), full.final_params);
}

// train.accumulate: a checkpoint falls between steps, never between micro-batches, and the
// loader skips whole steps of accumulate x batch samples.
TEST(CheckpointResume, AccumulatedStepsResumeExactly) {
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("batch", int64_t(1024));
  cfg.set("train.accumulate", int64_t(2));
  cfg.set("mlp.dropout", 0.3);
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(full.steps, 28);
  const fs::path ck = fs::path(dir.path()) / "checkpoints";
  EXPECT_EQ(resume_from(cfg, (ck / checkpoint_name(10)).string()), full.final_params);
  EXPECT_EQ(resume_from(cfg, (ck / checkpoint_name(15)).string()), full.final_params);
}

// A graph with BatchNorm and a residual Add: the parameters and the running
// statistics (averaged over the workers after every step, kept in train.ckpt) resume exactly,
// and the running statistics are a real state (not left at their initial values).
TEST(CheckpointResume, GraphWithBatchNormResumesExactly) {
  TempDir dir;
  Config cfg = loom::testing::with_tiny_residual_graph(run_config(dir.path()));
  cfg.set("batch", int64_t(4096));  // 7 steps an epoch
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(full.steps, 14);
  ASSERT_EQ(full.final_state.size(), 16u);  // two BatchNorms x (mean, var) x 4 channels
  EXPECT_NE(full.final_state[0], 0.0f);     // the running mean moved
  EXPECT_NE(full.final_state[4], 1.0f);     // and the running variance
  const fs::path ck = fs::path(dir.path()) / "checkpoints";
  Config again = cfg;
  again.set("train.resume", (ck / checkpoint_name(10)).string());
  const TrainResult resumed = run_training(plan::read_run_plan(again));
  EXPECT_EQ(resumed.final_params, full.final_params);
  EXPECT_EQ(resumed.final_state, full.final_state);
}

TEST(CheckpointResume, CodecResidualsAdamAndDropoutResumeExactly) {
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("epochs", int64_t(1));
  cfg.set("codec", std::string("int8"));
  cfg.set("optim.name", std::string("adam"));
  cfg.set("optim.lr", 0.001);
  cfg.set("mlp.dropout", 0.3);
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const std::string from = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  EXPECT_EQ(resume_from(cfg, from), full.final_params);
  // Without the residuals (a fresh codec state) the bits differ: the test can fail.
  fs::path rank0 = fs::path(from) / "rank-00000.ckpt";
  CheckpointFile f = CheckpointFile::read(rank0.string());
  ASSERT_TRUE(f.has("strategy.f.bucket0.worker0.residual"));
}

TEST(CheckpointResume, TwoLevelCodecResidualsResumeExactly) {
  // 4 workers on 2 faked machines, 1-bit across them: the residuals are per node-shard, saved
  // under their own sections, and restore to the same bits.
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("epochs", int64_t(1));
  cfg.set("workers", int64_t(4));
  cfg.set("batch", int64_t(1024));
  cfg.set("codec", std::string("onebit"));
  cfg.set("comm.algorithm", std::string("two-level"));
  cfg.set("comm.ranks_per_node", int64_t(2));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const std::string from = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  EXPECT_EQ(resume_from(cfg, from), full.final_params);
  CheckpointFile f = CheckpointFile::read((fs::path(from) / "rank-00003.ckpt").string());
  EXPECT_TRUE(f.has("strategy.f.bucket0.node_shard.worker0.residual"));
  EXPECT_TRUE(f.has("strategy.f.bucket0.node_shard.owner.residual"));
  EXPECT_FALSE(f.has("strategy.f.bucket0.worker0.residual"));
  // A flat run's checkpoint does not restore into the two-level one: its sections differ.
  TempDir flat_dir;
  Config flat = cfg;
  flat.set("comm.algorithm", std::string("ring"));
  flat.set("output.dir", flat_dir.path());
  run_training(plan::read_run_plan(flat));
  const std::string flat_from =
      (fs::path(flat_dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  Config two_level_there = cfg;  // a resumed run writes into the run it resumes
  two_level_there.set("output.dir", flat_dir.path());
  try {
    resume_from(two_level_there, flat_from);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node_shard"), std::string::npos) << e.what();
  }
}

TEST(CheckpointResume, TwoLevelShardedOptimizerResumesExactly) {
  // Each rank updates (and keeps optimizer state for) its two-level block only.
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("epochs", int64_t(1));
  cfg.set("workers", int64_t(4));
  cfg.set("batch", int64_t(1024));
  cfg.set("optim.momentum", 0.9);
  cfg.set("comm.algorithm", std::string("two-level"));
  cfg.set("comm.ranks_per_node", int64_t(2));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const std::string from = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  EXPECT_EQ(resume_from(cfg, from), full.final_params);
}

// fp16 keeps its residual in bf16 (ResidualFormat::kBf16): the checkpoint holds it as floats
// (every one a bfloat16 value) and the resumed run reaches the same bits.
TEST(CheckpointResume, Bf16ResidualsResumeExactly) {
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("epochs", int64_t(1));
  cfg.set("codec", std::string("fp16"));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const std::string from = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  EXPECT_EQ(resume_from(cfg, from), full.final_params);
  CheckpointFile f = CheckpointFile::read((fs::path(from) / "rank-00000.ckpt").string());
  const std::vector<float> r = f.f32("strategy.f.bucket0.worker0.residual");
  size_t nonzero = 0;
  for (float x : r) {
    ASSERT_EQ(std::bit_cast<uint32_t>(x) & 0xffffu, 0u) << x;  // a bfloat16 value
    nonzero += x != 0.0f;
  }
  EXPECT_GT(nonzero, r.size() / 2);  // fp16 leaves a rounding error in nearly every element
}

// The codec options' state: 1-bit with its defaults at two workers (momentum correction keeps
// each worker's velocity, the encodings are gathered) and a warm-up that ends between two
// checkpoints; top-k with a small bucket summed exactly beside a compressed one. Resumed in
// the warm-up and after it, each run reaches the same bits.
TEST(CheckpointResume, CodecWarmupAndMomentumCorrectionResumeExactly) {
  for (const char* codec : {"onebit", "topk"}) {
    SCOPED_TRACE(codec);
    TempDir dir;
    Config cfg = run_config(dir.path());
    cfg.set("codec", std::string(codec));
    cfg.set("optim.momentum", 0.9);
    cfg.set("mlp.dropout", 0.3);
    cfg.set("codec.warmup_steps", int64_t(7));
    cfg.set("sync.bucket_kib", int64_t(64));  // [784x32 layer] and [the other two], 2.7 KiB
    const TrainResult full = run_training(plan::read_run_plan(cfg));
    const fs::path ck = fs::path(dir.path()) / "checkpoints";
    for (int s : {5, 10, 15})
      EXPECT_EQ(resume_from(cfg, (ck / checkpoint_name(s)).string()), full.final_params) << s;
    const CheckpointFile f =
        CheckpointFile::read((ck / checkpoint_name(10) / "rank-00001.ckpt").string());
    ASSERT_TRUE(f.has("strategy.f.bucket0.local_velocity"));
    ASSERT_TRUE(f.has("strategy.f.bucket1.local_velocity"));
    // Gathered 1-bit and top-k keep one residual per bucket on each rank: no owner's.
    EXPECT_TRUE(f.f32("strategy.f.bucket0.owner.residual").empty());
    EXPECT_FALSE(f.has("strategy.f.bucket0.worker1.residual"));
    // The resumed run must not fall back to a fresh state: without the velocities the bits
    // differ.
    Config off = cfg;
    off.set("sync.momentum_correction", false);
    off.set("output.dir", dir.path() + "/off");
    EXPECT_NE(run_training(plan::read_run_plan(off)).final_params, full.final_params);
  }
}

// Model parallelism: each rank's slices of the split layers differ, and with an odd width
// over 2 ranks even their count differs; each rank's file keeps its own.
// Hybrid with a codec: the data-parallel layer's int8 residuals come back too.
TEST(CheckpointResume, ModelParallelSlicesResumeExactly) {
  for (const char* mode : {"model", "hybrid"}) {
    SCOPED_TRACE(mode);
    TempDir dir;
    Config cfg = run_config(dir.path());
    cfg.set("epochs", int64_t(1));
    cfg.set("parallel", std::string(mode));
    cfg.set_override("mlp.hidden=[33, 16]");
    cfg.set("mlp.dropout", 0.3);
    if (std::string(mode) == "hybrid") {  // 784 -> 32 data-parallel, 32 -> 17 column, row
      cfg.set_override("mlp.hidden=[32, 17]");
      cfg.set_override("parallel.linear=[\"data\", \"column\", \"row\"]");
      cfg.set("parallel.activations", std::string("int8"));
      cfg.set("codec", std::string("int8"));
    }
    const TrainResult full = run_training(plan::read_run_plan(cfg));
    const fs::path from = fs::path(dir.path()) / "checkpoints" / checkpoint_name(5);
    EXPECT_EQ(resume_from(cfg, from.string()), full.final_params);
    const CheckpointFile r0 = CheckpointFile::read((from / "rank-00000.ckpt").string());
    const CheckpointFile r1 = CheckpointFile::read((from / "rank-00001.ckpt").string());
    ASSERT_TRUE(r0.has("params.local"));
    ASSERT_TRUE(r1.has("params.local"));
    EXPECT_NE(r0.f32("params.local").size(), r1.f32("params.local").size());
    if (std::string(mode) == "hybrid") {
      EXPECT_TRUE(r1.has("strategy.f.data_parallel.owner.residual"));
    }
  }
}

TEST(CheckpointResume, StopSignalWritesACheckpointAndResumeFinishesTheSameBits) {
  TempDir dir, ref;
  Config cfg = run_config(dir.path());
  const TrainResult full = run_training(plan::read_run_plan(run_config(ref.path())));
  // SIGTERM reaches rank 0's thread through the real handler at the end of step 7: after the
  // periodic checkpoint of step 5, before the one of step 10, in the middle of epoch 1.
  struct Hook {
    Hook() {
      set_stop_check_hook([](int rank, int64_t steps_done) {
        if (rank != 0 || steps_done != 7) return;
        // Without the handler SIGTERM would kill the test binary.
        EXPECT_TRUE(stop_handlers_installed());
        if (stop_handlers_installed()) std::raise(SIGTERM);
      });
    }
    ~Hook() { set_stop_check_hook(nullptr); }
  };
  TrainResult stopped;
  {
    Hook hook;
    stopped = run_training(plan::read_run_plan(cfg));
  }
  ASSERT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.steps, 7);
  EXPECT_EQ(fs::path(stopped.checkpoint).filename().string(), checkpoint_name(7));
  const fs::path ck = fs::path(dir.path()) / "checkpoints";
  EXPECT_FALSE(fs::exists(ck / checkpoint_name(10)));
  EXPECT_EQ(find_latest_checkpoint(dir.path()), (ck / checkpoint_name(7)).string());
  EXPECT_EQ(resume_from(cfg, dir.path()), full.final_params);
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// A resumed run writes into the same output.dir: metrics.jsonl keeps the epochs the checkpoint
// had completed and drops what came after it (here the interrupted run's epoch 2 line and a
// line cut short by a kill), so it ends with one line per epoch.
TEST(CheckpointResume, MetricsKeepEarlierEpochsAcrossAResume) {
  TempDir dir;
  const Config cfg = run_config(dir.path());
  run_training(plan::read_run_plan(cfg));
  const fs::path metrics = fs::path(dir.path()) / "metrics.jsonl";
  const std::vector<std::string> full = read_lines(metrics);
  ASSERT_EQ(full.size(), 2u);
  std::ofstream(metrics, std::ios::app) << "{\"epoch\": 3, \"steps\"";  // a kill mid-write
  // Step 20 is in epoch 2 (14 steps per epoch): epoch 1's line stays, epoch 2 is trained again.
  resume_from(cfg, (fs::path(dir.path()) / "checkpoints" / checkpoint_name(20)).string());
  const std::vector<std::string> resumed = read_lines(metrics);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], full[0]);
  EXPECT_NE(resumed[1].find("\"epoch\":2"), std::string::npos) << resumed[1];
  // A resume that fails (no checkpoint there) writes nothing, there or anywhere.
  TempDir empty;
  Config elsewhere = cfg;
  elsewhere.set("output.dir", empty.path());
  EXPECT_THROW(resume_from(elsewhere, empty.path()), InputError);
  EXPECT_TRUE(fs::is_empty(empty.path()));
  EXPECT_EQ(read_lines(metrics), resumed);
  // Every line and the summary carry the format version (docs/formats.md).
  for (const auto& line : resumed)
    EXPECT_NE(line.find("\"format_version\":2"), std::string::npos) << line;
  std::ifstream summary(fs::path(dir.path()) / "summary.json");
  std::stringstream summary_text;
  summary_text << summary.rdbuf();
  EXPECT_NE(summary_text.str().find("\"format_version\": 1"), std::string::npos)
      << summary_text.str();
}

// A resume into a run directory whose metrics.jsonl a newer loom wrote stops, naming the file
// and the version, rather than mixing lines of two formats.
TEST(CheckpointResume, MetricsOfANewerFormatVersionStopTheResume) {
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("epochs", int64_t(1));
  run_training(plan::read_run_plan(cfg));
  const fs::path metrics = fs::path(dir.path()) / "metrics.jsonl";
  std::ofstream(metrics, std::ios::trunc) << "{\"epoch\":1,\"format_version\":8}\n";
  try {
    resume_from(cfg, (fs::path(dir.path()) / "checkpoints" / checkpoint_name(10)).string());
    FAIL() << "resumed over a metrics file of format version 8";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(metrics.string() + ":1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("metrics format version 8"), std::string::npos) << msg;
  }
}

TEST(CheckpointResume, NanAbortNamesStepAndRankSkipRollsBack) {
  TempDir dir;
  Config cfg = run_config(dir.path());
  cfg.set("optim.lr", 1000.0);  // diverges within a few steps
  cfg.set("train.checkpoint_every", int64_t(0));
  try {
    run_training(plan::read_run_plan(cfg));
    FAIL();
  } catch (const NumericError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("at step"), std::string::npos) << w;
    EXPECT_NE(w.find("on rank"), std::string::npos) << w;
    EXPECT_NE(w.find("nan_policy"), std::string::npos) << w;
  }
  // Skip: bad steps are rolled back and the learning rate scale falls; here the parameters
  // are already huge before the first NaN: the loss of the rolled-back parameters is NaN on
  // the next batch too, which no learning rate mends, so the run stops at the second skip,
  // saying why, rather than after all of train.nan_max_skips.
  TrainOptions again;  // the aborted run left its files: replace them
  again.force = true;
  cfg.set("train.nan_policy", std::string("skip"));
  cfg.set("train.nan_lr_factor", 1e-3);
  cfg.set("train.nan_max_skips", int64_t(20));
  try {
    run_training(plan::read_run_plan(cfg), again);
    FAIL();
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("2 consecutive steps skipped"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("diverged before the first NaN"), std::string::npos)
        << e.what();
  }
  // With no skips allowed the first bad step aborts, saying so.
  cfg.set("train.nan_max_skips", int64_t(0));
  try {
    run_training(plan::read_run_plan(cfg), again);
    FAIL();
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("consecutive steps skipped"), std::string::npos)
        << e.what();
  }
}

uintmax_t dir_bytes(const fs::path& p) {
  uintmax_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

TEST(CheckpointResume, DiskFullKeepsThePreviousCheckpointAndTrainingGoesOn) {
  TempDir a, b;
  Config probe = run_config(a.path());
  probe.set("max_steps", int64_t(5));
  run_training(plan::read_run_plan(probe));
  const uintmax_t one = dir_bytes(fs::path(a.path()) / "checkpoints" / checkpoint_name(5));
  // Room for one checkpoint and a half: the second fails part-way.
  set_checkpoint_write_limit(int64_t(one + one / 2));
  Config cfg = run_config(b.path());
  cfg.set("max_steps", int64_t(12));
  // Training goes on to its last step; then the final weights meet the full disk too: the run
  // stops with an error naming them, after writing its summary.
  std::string error;
  try {
    run_training(plan::read_run_plan(cfg));
  } catch (const InputError& e) {
    error = e.what();
  }
  set_checkpoint_write_limit(-1);
  EXPECT_NE(error.find("the run trained 12 steps, but its weights were not saved: " + b.path() +
                       "/model.safetensors: cannot write"),
            std::string::npos)
      << error;
  std::ifstream summary(fs::path(b.path()) / "summary.json");
  std::stringstream text;
  text << summary.rdbuf();
  EXPECT_NE(text.str().find("\"steps\": 12"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"model_file\": null"), std::string::npos) << text.str();
  const fs::path ck = fs::path(b.path()) / "checkpoints";
  EXPECT_TRUE(fs::exists(ck / checkpoint_name(5)));
  EXPECT_FALSE(fs::exists(ck / checkpoint_name(10)));
  EXPECT_FALSE(fs::exists(ck / (checkpoint_name(10) + ".partial")));
  EXPECT_EQ(find_latest_checkpoint(b.path()), (ck / checkpoint_name(5)).string());
}

}  // namespace
}  // namespace loom::train
