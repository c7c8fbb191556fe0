// A resume on another world size (docs/checkpoint.md, "Another world size"): the global batch
// kept, the optimizer's shards put together and split again, codec residuals summed and handed
// on, block momentum carried at block boundaries, the parameter servers' shards put together by
// key and handed to the new servers, and the refusals where no exact rule exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/temp_dir.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/sync_reader.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/strategy.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/checkpoint_guard.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

constexpr int kResumeAt = 20, kSteps = 70;  // 50 steps after the resume

// `workers` x batch: a global batch of 512, 117 steps per Fashion-MNIST epoch; a step line in
// metrics.jsonl per step and a checkpoint every 20.
Config run_config(const std::string& out, int workers) {
  Config cfg;
  cfg.set("workers", int64_t(workers));
  cfg.set("batch", int64_t(512 / workers));
  cfg.set("epochs", int64_t(1));
  cfg.set("max_steps", int64_t(kSteps));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("output.dir", out);
  cfg.set_override("mlp.hidden=[32, 16]");
  cfg.set("train.log_every", int64_t(1));
  cfg.set("train.checkpoint_every", int64_t(kResumeAt));
  cfg.set("train.checkpoint_keep", int64_t(10));
  return cfg;
}

std::string step_dir(const std::string& run, int64_t step) {
  return (fs::path(run) / "checkpoints" / checkpoint_name(step)).string();
}

// train_loss of the step lines of a run's metrics.jsonl, by step (index 0: step 1; NaN where
// it was null).
std::vector<double> step_losses(const std::string& run) {
  std::ifstream in(fs::path(run) / "metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("kind", "") != "step") continue;
    const size_t step = j.at("step").get<size_t>();
    if (out.size() < step) out.resize(step, NAN);
    // null: a step skipped for a NaN loss or gradient.
    out[step - 1] = j.at("train_loss").is_null() ? NAN : j.at("train_loss").get<double>();
  }
  return out;
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v.at(i);
  return s / double(to - from);
}

// The uninterrupted run in `ref` on `from_workers`; a copy of it resumed from its checkpoint at
// kResumeAt on `to_workers` (config and batch from the checkpoint: the global batch is kept).
// Returns the resumed run's directory.
std::string resume_copy(const Config& cfg, const std::string& ref, const std::string& copy,
                        int to_workers) {
  fs::copy(ref, copy, fs::copy_options::recursive);
  Config resumed = cfg;
  resumed.set("workers", int64_t(to_workers));
  resumed.set("output.dir", copy);
  resumed.set("train.resume", step_dir(copy, kResumeAt));
  const TrainResult r = run_training(plan::read_run_plan(resumed));
  EXPECT_EQ(r.steps, kSteps);
  EXPECT_EQ(r.world, to_workers);
  return copy;
}

// The mean training loss of the 50 steps after the resume is within 2% of the uninterrupted
// run's same steps; the first step after it trains the same weights on the same samples, so its
// loss is the uninterrupted run's up to the order of the sums.
void expect_tracks(const std::string& ref, const std::string& resumed) {
  const std::vector<double> a = step_losses(ref), b = step_losses(resumed);
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps));
  const double ma = mean(a, kResumeAt, kSteps), mb = mean(b, kResumeAt, kSteps);
  EXPECT_LT(std::fabs(mb - ma), 0.02 * ma) << ma << " vs " << mb;
  EXPECT_NEAR(b[kResumeAt], a[kResumeAt], 1e-5 * a[kResumeAt]);
  // The steps before the resume are the checkpoint's own lines.
  for (int i = 0; i < kResumeAt; ++i) EXPECT_EQ(a[size_t(i)], b[size_t(i)]) << i;
}

TEST(CheckpointReshard, TwoWorkersToOneAndOneToTwoTrackTheUninterruptedLoss) {
  TempDir dir;
  const std::string two = dir.path() + "/two", one = dir.path() + "/one";
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    fs::remove_all(two);
    fs::remove_all(one);
    Config cfg2 = run_config(two, 2);
    Config cfg1 = run_config(one, 1);
    cfg2.set("optim.name", std::string(optim));
    cfg1.set("optim.name", std::string(optim));
    if (std::string(optim) == "adam") {
      cfg2.set("optim.lr", 0.003);
      cfg1.set("optim.lr", 0.003);
    }
    run_training(plan::read_run_plan(cfg2));
    run_training(plan::read_run_plan(cfg1));
    ::testing::internal::CaptureStderr();
    const std::string to1 = resume_copy(cfg2, two, dir.path() + "/two-to-one-" + optim, 1);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(log.find("not exact"), std::string::npos) << log;  // fp32: every piece carried
    expect_tracks(two, to1);
    expect_tracks(one, resume_copy(cfg1, one, dir.path() + "/one-to-two-" + optim, 2));
    // The resumed run kept the global batch: its config has the batch per worker recomputed.
    const Config saved = Config::from_string(
        CheckpointFile::read(step_dir(to1, 40) + "/train.ckpt").text("config"), "saved");
    EXPECT_EQ(saved.get_int("batch", 0, 0, 1 << 20), 512);
  }
}

// Loads the checkpoint `from` into a world of `workers` built from `cfg` and writes it again
// under `to_root` at the same step: a resume and a checkpoint with no step between.
void reload_and_save(const Config& cfg, int workers, const std::string& from,
                     const std::string& to_root) {
  const CheckpointFile train = CheckpointFile::read(from + "/train.ckpt");
  const std::vector<int64_t> p = train.i64("position", 5);
  const nn::Shape shape = train.i64(kCheckpointInputShape);
  const int classes = int(train.i64(kCheckpointNumClasses, 1)[0]);
  Config c = cfg;
  c.set("workers", int64_t(workers));
  std::unique_ptr<comm::World> world =
      comm::create_world("thread", workers, plan::read_comm_options(c));
  world->run([&](comm::Communicator& comm) {
    Backend& be = cpu_backend();
    std::unique_ptr<nn::Model> model = plan::build_model(c, comm, be, shape, classes);
    std::unique_ptr<optim::Optimizer> opt =
        optim::make_optimizer(plan::read_optimizer_options(c), be, model->num_params());
    std::unique_ptr<sync::Strategy> strategy = plan::make_strategy(c, comm, *model, *opt);
    WorkerParts w{be, *model, *opt, *strategy, nullptr};
    TrainPosition expect;
    expect.steps_per_epoch = p[1];
    expect.world = workers;
    expect.seed = uint64_t(p[3]);
    expect.global_batch = 512;
    LoadedCheckpoint ck = load_checkpoint(comm, from, w, expect);
    strategy->start();
    restore_strategy(w, ck.rank_files, ck.same_world);
    TrainPosition pos = ck.pos;
    pos.world = workers;
    pos.global_batch = 512;
    ASSERT_FALSE(save_checkpoint(comm, to_root, 10, w, pos, c.canonical_text()).empty());
  });
}

std::vector<CheckpointFile> rank_files(const std::string& dir, int world) {
  std::vector<CheckpointFile> out;
  for (int r = 0; r < world; ++r)
    out.push_back(CheckpointFile::read(fmt::format("{}/rank-{:05d}.ckpt", dir, r)));
  return out;
}

// Every residual of every rank (worker and owner sides), added up per bucket element.
std::vector<double> residual_sum(const std::vector<CheckpointFile>& ranks, const std::string& b,
                                 size_t n) {
  std::vector<double> sum(n, 0.0);
  const int world = int(ranks.size());
  for (int r = 0; r < world; ++r) {
    const CheckpointFile& f = ranks[size_t(r)];
    auto add = [&](const std::string& name, size_t offset) {
      if (!f.has(name)) return;
      const std::vector<float> v = f.f32(name);
      for (size_t i = 0; i < v.size(); ++i) sum[offset + i] += v[i];
    };
    add("strategy.f." + b + ".pending", 0);
    for (int j = 0; j < world; ++j)
      add(fmt::format("strategy.f.{}.worker{}.residual", b, j),
          world > 1 ? comm::block_range(n, world, j).begin : 0);
    add("strategy.f." + b + ".owner.residual",
        world > 1 ? comm::block_range(n, world, r).begin : 0);
  }
  return sum;
}

// 2 -> 1 -> 2 with the optimizer sharded (ZeRO-1) brings back every section of every file bit
// for bit: each rank's blocks of the optimizer state (zero where it owns none), the
// parameters, the position.
TEST(CheckpointReshard, WorldSizeRoundTripRestoresEveryPieceOfState) {
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    TempDir dir;
    Config cfg = run_config(dir.path() + "/run", 2);
    cfg.set("optim.name", std::string(optim));
    cfg.set("max_steps", int64_t(kResumeAt));
    cfg.set("sync.bucket_kib", int64_t(64));  // two buckets, each sharded on its own
    run_training(plan::read_run_plan(cfg));
    const std::string original = step_dir(dir.path() + "/run", kResumeAt);
    reload_and_save(cfg, 1, original, dir.path() + "/one");
    const std::string one = (fs::path(dir.path()) / "one" / checkpoint_name(kResumeAt)).string();
    reload_and_save(cfg, 2, one, dir.path() + "/two");
    const std::string two = (fs::path(dir.path()) / "two" / checkpoint_name(kResumeAt)).string();

    const std::vector<CheckpointFile> a = rank_files(original, 2), b = rank_files(two, 2);
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(a[size_t(r)].has("optim.owned"));
      EXPECT_EQ(a[size_t(r)].sections().size(), b[size_t(r)].sections().size());
      for (const auto& [name, section] : a[size_t(r)].sections()) {
        ASSERT_TRUE(b[size_t(r)].has(name)) << name;
        EXPECT_TRUE(section.data == b[size_t(r)].sections().at(name).data) << r << " " << name;
      }
    }
    // Sharded: each rank of the original owns part of the state, and its other part is zero,
    // so the round trip could not pass by copying one rank's file to both.
    EXPECT_NE(a[0].f32(std::string(optim) == "sgd" ? "optim.velocity" : "optim.adam_m"),
              a[1].f32(std::string(optim) == "sgd" ? "optim.velocity" : "optim.adam_m"));
    // The world of one owns all of it: the blocks put together.
    const CheckpointFile one_rank = CheckpointFile::read(one + "/rank-00000.ckpt");
    const std::string buf = std::string(optim) == "sgd" ? "optim.velocity" : "optim.adam_m";
    const std::vector<float> merged = one_rank.f32(buf);
    EXPECT_EQ(one_rank.i64("optim.owned"), (std::vector<int64_t>{0, int64_t(merged.size())}));
    for (int r = 0; r < 2; ++r) {
      const std::vector<int64_t> owned = a[size_t(r)].i64("optim.owned");
      const std::vector<float> v = a[size_t(r)].f32(buf);
      ASSERT_GE(owned.size(), 4u);  // a block of each of the two buckets
      for (size_t k = 0; k < owned.size(); k += 2)
        for (int64_t i = owned[k]; i < owned[k] + owned[k + 1]; ++i)
          ASSERT_EQ(merged[size_t(i)], v[size_t(i)]) << r << " " << i;
    }
    const CheckpointFile ta = CheckpointFile::read(original + "/train.ckpt");
    const CheckpointFile tb = CheckpointFile::read(two + "/train.ckpt");
    for (const char* s : {"params", "position", "lr_scale", "loader.epoch_step"})
      EXPECT_TRUE(ta.sections().at(s).data == tb.sections().at(s).data) << s;
  }
}

// The message of the loom::Error `fn` throws (of type E), or "" when it throws none.
template <typename E, typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

Config resume_config(const Config& cfg, const std::string& from, int workers) {
  Config c = cfg;
  c.set("workers", int64_t(workers));
  c.set("train.resume", from);
  return c;
}

// The global batch is kept or the resume stops: a world size that does not divide it, or a
// batch given for the resume that would change it, is a ConfigError saying so.
TEST(CheckpointReshard, AGlobalBatchThatCannotBeKeptIsRefused) {
  TempDir dir;
  Config cfg = run_config(dir.path(), 2);
  cfg.set("max_steps", int64_t(kResumeAt));
  run_training(plan::read_run_plan(cfg));
  const std::string from = step_dir(dir.path(), kResumeAt);
  std::string e = error_of<ConfigError>(
      [&] { run_training(plan::read_run_plan(resume_config(cfg, from, 3))); });
  EXPECT_NE(e.find("global batch of 512 (2 workers) does not divide over 3 workers"),
            std::string::npos)
      << e;
  Config other = resume_config(cfg, from, 1);
  other.set("batch", int64_t(100));
  e = error_of<ConfigError>([&] { run_training(plan::read_run_plan(other)); });
  EXPECT_NE(e.find("a resume keeps it (batch 512"), std::string::npos) << e;
  other.set("batch", int64_t(512));  // the batch that keeps it, given explicitly: resumes
  other.set("max_steps", int64_t(kResumeAt + 1));
  EXPECT_EQ(run_training(plan::read_run_plan(other)).steps, kResumeAt + 1);
}

// A rank file missing from the checkpoint: nothing to put the state together from. The error
// names the file, given the step directory or the run's.
TEST(CheckpointReshard, AMissingRankFileIsAnInputErrorNamingIt) {
  TempDir dir;
  Config cfg = run_config(dir.path(), 2);
  cfg.set("max_steps", int64_t(kResumeAt));
  run_training(plan::read_run_plan(cfg));
  const std::string from = step_dir(dir.path(), kResumeAt);
  fs::remove(fs::path(from) / "rank-00001.ckpt");
  for (const std::string& path : {from, dir.path()}) {
    const std::string e = error_of<InputError>(
        [&] { run_training(plan::read_run_plan(resume_config(cfg, path, 1))); });
    EXPECT_NE(e.find("rank-00001.ckpt"), std::string::npos) << e;
  }
}

// Rank files without "optim.owned" (an older loom) do not say which rank's copy of the
// optimizer state is the one it used: they resume on their own world size only.
TEST(CheckpointReshard, RankFilesWithoutTheirShardLayoutResumeOnTheirWorldSizeOnly) {
  TempDir dir;
  Config cfg = run_config(dir.path(), 2);
  cfg.set("max_steps", int64_t(kResumeAt));
  run_training(plan::read_run_plan(cfg));
  const std::string from = step_dir(dir.path(), kResumeAt);
  for (int r = 0; r < 2; ++r) {
    const std::string path = fmt::format("{}/rank-{:05d}.ckpt", from, r);
    const CheckpointFile f = CheckpointFile::read(path);
    CheckpointFile older;
    for (const auto& [name, section] : f.sections()) {
      if (name == "optim.owned") continue;
      if (section.type == SectionType::kF32)
        older.put_f32(name, f.f32(name));
      else if (section.type == SectionType::kI64)
        older.put_i64(name, f.i64(name));
      else if (section.type == SectionType::kBytes)
        older.put_bytes(name, f.bytes(name));
      else
        FAIL() << name;
    }
    write_checkpoint_file(path, older.serialize());
  }
  const std::string e =
      error_of<InputError>([&] { run_training(plan::read_run_plan(resume_config(cfg, from, 1))); });
  EXPECT_NE(e.find("without section 'optim.owned'"), std::string::npos) << e;
  EXPECT_NE(e.find("rank-00000.ckpt"), std::string::npos) << e;
  Config same = resume_config(cfg, from, 2);
  same.set("max_steps", int64_t(kResumeAt + 1));
  EXPECT_EQ(run_training(plan::read_run_plan(same)).steps, kResumeAt + 1);
}

// int8 (striped: worker-side residuals per stripe, the owner's of its own stripe) and top-k
// (gathered: one residual of the whole bucket per rank): 2 -> 4 -> 2 sums every rank's
// residuals and hands the sum to rank 0, so it comes back through the round trip; a world of one
// runs no codec and drops them. The log says once that such a resume is not exact.
TEST(CheckpointReshard, CodecResidualsAreSummedAndHandedOn) {
  for (const char* codec : {"int8", "topk"}) {
    SCOPED_TRACE(codec);
    TempDir dir;
    Config cfg = run_config(dir.path() + "/run", 2);
    cfg.set("codec", std::string(codec));
    cfg.set("sync.bucket_kib", int64_t(64));
    run_training(plan::read_run_plan(cfg));
    const std::string original = step_dir(dir.path() + "/run", kResumeAt);
    reload_and_save(cfg, 4, original, dir.path() + "/four");
    const std::string four = (fs::path(dir.path()) / "four" / checkpoint_name(kResumeAt)).string();
    reload_and_save(cfg, 2, four, dir.path() + "/two");
    const std::string two = (fs::path(dir.path()) / "two" / checkpoint_name(kResumeAt)).string();
    const std::vector<CheckpointFile> a = rank_files(original, 2), m = rank_files(four, 4),
                                      b = rank_files(two, 2);
    int carried = 0;
    for (const std::string bucket : {"bucket0", "bucket1"}) {
      // The bucket's size: its stripes' (or its whole) worker-side residuals on rank 0.
      size_t n = 0;
      for (int j = 0; j < 2; ++j) {
        const std::string name = fmt::format("strategy.f.{}.worker{}.residual", bucket, j);
        if (a[0].has(name)) n += a[0].f32(name).size();
      }
      ASSERT_GT(n, 0u) << bucket;
      const std::vector<double> sa = residual_sum(a, bucket, n), sm = residual_sum(m, bucket, n),
                                sb = residual_sum(b, bucket, n);
      double norm = 0;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(sm[i], double(float(sa[i]))) << bucket << " " << i;  // summed, rounded once
        ASSERT_EQ(sb[i], sm[i]) << bucket << " " << i;
        norm += sa[i] * sa[i];
      }
      carried += norm > 0;  // top-k's small bucket is summed exactly: nothing held back
    }
    EXPECT_GE(carried, 1);
    // Only rank 0 of a new world starts with residuals.
    for (const std::vector<CheckpointFile>* files : {&m, &b})
      for (size_t r = 1; r < files->size(); ++r)
        for (const auto& [name, section] : (*files)[r].sections()) {
          if (name.find(".residual") == std::string::npos) continue;
          for (float x : (*files)[r].f32(name)) ASSERT_EQ(x, 0.0f) << r << " " << name;
        }

    // 2 -> 1 on the loop: the residuals are dropped, once said in the log. With int8 (a small
    // quantisation error held back) the run tracks the uninterrupted one; with top-k the world
    // of one trains on whole gradients where the two workers sent 1 in 100 of them.
    ::testing::internal::CaptureStderr();
    const std::string to1 = resume_copy(cfg, dir.path() + "/run", dir.path() + "/to-one", 1);
    const std::string log = ::testing::internal::GetCapturedStderr();
    const size_t at = log.find("not exact: the codec residuals are dropped");
    EXPECT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.find("not exact", at + 1), std::string::npos) << log;  // once
    if (std::string(codec) == "int8") expect_tracks(dir.path() + "/run", to1);
    const std::string to2 = resume_copy(cfg, to1, dir.path() + "/back-to-two", 2);
    EXPECT_EQ(step_losses(to2).size(), size_t(kSteps));
  }
}

// Block momentum at a block boundary: W_prev and V are the same on every rank and come back
// bit for bit through 2 -> 1 -> 2; a checkpoint inside a block, where each worker trains a model
// of its own, resumes on its world size only. The local momentum is reset at each block here:
// kept (the default), each worker's own is part of the state, and a world of one keeps one.
TEST(CheckpointReshard, BlockMomentumReshardsAtBlockBoundariesOnly) {
  TempDir dir;
  Config cfg = run_config(dir.path() + "/run", 2);
  cfg.set("sync", std::string("bmuf"));
  cfg.set("bmuf.tau", int64_t(4));
  cfg.set("bmuf.reset_momentum", true);
  cfg.set("max_steps", int64_t(30));
  run_training(plan::read_run_plan(cfg));
  const std::string boundary = step_dir(dir.path() + "/run", kResumeAt);  // 20 = 5 blocks
  reload_and_save(cfg, 1, boundary, dir.path() + "/one");
  const std::string one = (fs::path(dir.path()) / "one" / checkpoint_name(kResumeAt)).string();
  reload_and_save(cfg, 2, one, dir.path() + "/two");
  const std::string two = (fs::path(dir.path()) / "two" / checkpoint_name(kResumeAt)).string();
  const std::vector<CheckpointFile> a = rank_files(boundary, 2), b = rank_files(two, 2);
  for (int r = 0; r < 2; ++r)
    for (const auto& [name, section] : a[size_t(r)].sections()) {
      ASSERT_TRUE(b[size_t(r)].has(name)) << name;
      EXPECT_TRUE(section.data == b[size_t(r)].sections().at(name).data) << r << " " << name;
    }
  Config resumed = resume_config(cfg, boundary, 1);
  resumed.set("output.dir", dir.path() + "/run");
  EXPECT_EQ(run_training(plan::read_run_plan(resumed)).steps, 30);

  Config mid = run_config(dir.path() + "/mid", 2);
  mid.set("sync", std::string("bmuf"));
  mid.set("bmuf.tau", int64_t(8));  // step 20 is 4 steps into the third block
  mid.set("max_steps", int64_t(kResumeAt));
  run_training(plan::read_run_plan(mid));
  const std::string e = error_of<ConfigError>([&] {
    run_training(
        plan::read_run_plan(resume_config(mid, step_dir(dir.path() + "/mid", kResumeAt), 1)));
  });
  EXPECT_NE(e.find("4 steps into a block of bmuf.tau = 8"), std::string::npos) << e;
}

// No exact rule: model-parallel slices depend on the world size.
TEST(CheckpointReshard, ModelParallelResumesOnItsWorldSizeOnly) {
  TempDir dir;
  Config mp = run_config(dir.path() + "/mp", 2);
  mp.set("parallel", std::string("model"));
  mp.set("max_steps", int64_t(kResumeAt));
  run_training(plan::read_run_plan(mp));
  const std::string e = error_of<InputError>([&] {
    run_training(
        plan::read_run_plan(resume_config(mp, step_dir(dir.path() + "/mp", kResumeAt), 1)));
  });
  EXPECT_NE(e.find("model-parallel layers"), std::string::npos) << e;
}

// The parameter server (sync = "ps", synchronous: ps.staleness = 0) on `workers` workers and
// `servers` server threads.
Config ps_config(const std::string& out, int workers, int servers, const std::string& optim) {
  Config cfg = run_config(out, workers);
  cfg.set("sync", std::string("ps"));
  cfg.set("ps.servers", int64_t(servers));
  cfg.set("sync.bucket_kib", int64_t(64));  // several pieces per server
  cfg.set("optim.name", optim);
  if (optim == "adam") cfg.set("optim.lr", 0.003);
  return cfg;
}

// The strategy sections of a rank file ("strategy.*": the parameter servers' shards).
std::map<std::string, std::vector<uint8_t>> strategy_sections(const std::string& file) {
  std::map<std::string, std::vector<uint8_t>> out;
  const CheckpointFile f = CheckpointFile::read(file);
  for (const auto& [name, section] : f.sections())
    if (name.rfind("strategy.", 0) == 0) out[name] = section.data;
  return out;
}

// The servers' optimizer state is in rank 0's file, so stop at step 20 and resume gives the
// uninterrupted run's parameters and server state bit for bit (the synchronous parameter
// server is deterministic; the asynchronous one is not resumed exactly: docs/ps.md).
TEST(CheckpointReshard, ParameterServerResumesExactlyOnItsWorldSize) {
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    TempDir dir;
    const std::string ref = dir.path() + "/ref";
    Config cfg = ps_config(ref, 2, 2, optim);
    cfg.set("max_steps", int64_t(2 * kResumeAt));
    run_training(plan::read_run_plan(cfg));
    const std::string copy = dir.path() + "/copy";
    fs::copy(ref, copy, fs::copy_options::recursive);
    fs::remove_all(step_dir(copy, 2 * kResumeAt));
    Config resumed = cfg;
    resumed.set("output.dir", copy);
    resumed.set("train.resume", step_dir(copy, kResumeAt));
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run_training(plan::read_run_plan(resumed)).steps, 2 * kResumeAt);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(log.find("not exact"), std::string::npos) << log;
    EXPECT_EQ(log.find("starts fresh"), std::string::npos) << log;

    const std::string a = step_dir(ref, 2 * kResumeAt), b = step_dir(copy, 2 * kResumeAt);
    EXPECT_TRUE(CheckpointFile::read(a + "/train.ckpt").sections().at("params").data ==
                CheckpointFile::read(b + "/train.ckpt").sections().at("params").data);
    const auto sa = strategy_sections(a + "/rank-00000.ckpt");
    const auto sb = strategy_sections(b + "/rank-00000.ckpt");
    EXPECT_EQ(sa, sb);
    // The servers' optimizer buffers are there and not zero (so a fresh state would differ).
    const std::string buf = std::string(optim) == "sgd" ? "velocity" : "adam_m";
    for (int s = 0; s < 2; ++s) {
      const std::vector<float> v = CheckpointFile::read(a + "/rank-00000.ckpt")
                                       .f32(fmt::format("strategy.f.ps.server{}.optim.{}", s, buf));
      EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; })) << s;
    }
    // Only rank 0, which drives the servers, keeps their state.
    EXPECT_TRUE(strategy_sections(a + "/rank-00001.ckpt").empty());
  }
}

// Another world size and server count: the servers' shards put together by key and split
// again. The 50 steps after the resume track the uninterrupted run.
TEST(CheckpointReshard, ParameterServerTwoToOneAndOneToTwoTrackTheUninterruptedLoss) {
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    TempDir dir;
    const std::string two = dir.path() + "/two", one = dir.path() + "/one";
    Config cfg2 = ps_config(two, 2, 2, optim);
    Config cfg1 = ps_config(one, 1, 3, optim);
    run_training(plan::read_run_plan(cfg2));
    run_training(plan::read_run_plan(cfg1));
    // The resumed runs keep their own server counts: 2 -> 3 and 3 -> 2 shards.
    Config to1 = cfg2, to2 = cfg1;
    to1.set("ps.servers", int64_t(3));
    to2.set("ps.servers", int64_t(2));
    ::testing::internal::CaptureStderr();
    const std::string r1 = resume_copy(to1, two, dir.path() + "/two-to-one", 1);
    const std::string r2 = resume_copy(to2, one, dir.path() + "/one-to-two", 2);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(log.find("not exact"), std::string::npos) << log;
    EXPECT_EQ(log.find("starts fresh"), std::string::npos) << log;
    expect_tracks(two, r1);
    expect_tracks(one, r2);
  }
}

// 2 workers and 2 servers -> 1 worker and 3 servers -> 2 and 2 brings the servers' state
// back bit for bit; a rank file missing is an InputError naming it.
TEST(CheckpointReshard, ParameterServerWorldSizeRoundTripRestoresTheServerState) {
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    TempDir dir;
    Config cfg = ps_config(dir.path() + "/run", 2, 2, optim);
    cfg.set("max_steps", int64_t(kResumeAt));
    run_training(plan::read_run_plan(cfg));
    const std::string original = step_dir(dir.path() + "/run", kResumeAt);
    Config three = cfg;
    three.set("ps.servers", int64_t(3));
    reload_and_save(three, 1, original, dir.path() + "/one");
    const std::string one = (fs::path(dir.path()) / "one" / checkpoint_name(kResumeAt)).string();
    reload_and_save(cfg, 2, one, dir.path() + "/two");
    const std::string two = (fs::path(dir.path()) / "two" / checkpoint_name(kResumeAt)).string();
    const auto sa = strategy_sections(original + "/rank-00000.ckpt");
    ASSERT_TRUE(sa.count("strategy.b.ps.servers"));
    EXPECT_EQ(sa, strategy_sections(two + "/rank-00000.ckpt"));
    // The world of one held three shards: the same state cut at other keys.
    const CheckpointFile mid = CheckpointFile::read(one + "/rank-00000.ckpt");
    EXPECT_EQ(mid.bytes("strategy.b.ps.servers").size(), 2 * sizeof(int64_t));
    EXPECT_TRUE(mid.has("strategy.f.ps.server2.params"));
    EXPECT_FALSE(sa.count("strategy.f.ps.server2.params"));

    fs::remove(fs::path(original) / "rank-00001.ckpt");
    const std::string e = error_of<InputError>(
        [&] { run_training(plan::read_run_plan(resume_config(cfg, original, 1))); });
    EXPECT_NE(e.find("rank-00001.ckpt"), std::string::npos) << e;
  }
}

// Bounded staleness: the servers' state is restored but not the versions in flight, so the log
// says the resume is not exact; it computes on the checkpoint's parameters until its first
// pulls arrive and trains on from there.
TEST(CheckpointReshard, ParameterServerWithStalenessResumesAndSaysItIsNotExact) {
  TempDir dir;
  const std::string ref = dir.path() + "/ref";
  Config cfg = ps_config(ref, 2, 2, "sgd");
  cfg.set("ps.staleness", int64_t(2));
  cfg.set("ps.exact_delay", true);
  run_training(plan::read_run_plan(cfg));
  ::testing::internal::CaptureStderr();
  const std::string copy = resume_copy(cfg, ref, dir.path() + "/copy", 2);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("ps.staleness = 2: the servers' state is restored"), std::string::npos) << log;
  const std::vector<double> a = step_losses(ref), b = step_losses(copy);
  ASSERT_EQ(b.size(), size_t(kSteps));
  const double ma = mean(a, kResumeAt, kSteps), mb = mean(b, kResumeAt, kSteps);
  EXPECT_LT(std::fabs(mb - ma), 0.02 * ma) << ma << " vs " << mb;
}

// train.nan_policy = "skip" with the parameter server: the servers applied the bad step's
// gradients (+Inf from worker 1) before the loop saw them, so rolling back must reach the
// servers too, or every step after it computes on non-finite parameters.
TEST(CheckpointReshard, ParameterServerSkippedStepRollsTheServersBack) {
  TempDir dir;
  Config cfg = ps_config(dir.path(), 2, 2, "sgd");
  cfg.set("max_steps", int64_t(kResumeAt));
  cfg.set("train.nan_policy", std::string("skip"));
  set_gradient_fault_hook([](int rank, int64_t step) { return rank == 1 && step == 5; });
  TrainResult r;
  const std::string e = error_of<Error>([&] { r = run_training(plan::read_run_plan(cfg)); });
  set_gradient_fault_hook(nullptr);
  ASSERT_EQ(e, "");
  EXPECT_EQ(r.steps, kResumeAt);
  const std::string ck = step_dir(dir.path(), kResumeAt);
  const std::vector<float> p = CheckpointFile::read(ck + "/train.ckpt").f32("params");
  EXPECT_TRUE(std::all_of(p.begin(), p.end(), [](float x) { return std::isfinite(x); }));
  const CheckpointFile rank0 = CheckpointFile::read(ck + "/rank-00000.ckpt");
  for (int s = 0; s < 2; ++s)
    for (const char* what : {"params", "optim.velocity"}) {
      const std::vector<float> v = rank0.f32(fmt::format("strategy.f.ps.server{}.{}", s, what));
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }))
          << s << " " << what;
    }
  // The losses after the skipped step are finite: training went on from the rolled-back state.
  const std::vector<double> losses = step_losses(dir.path());
  ASSERT_EQ(losses.size(), size_t(kResumeAt));
  EXPECT_TRUE(std::isnan(losses[5]));  // step 6 (0-based 5) was skipped
  for (size_t i = 6; i < losses.size(); ++i) EXPECT_TRUE(std::isfinite(losses[i])) << i;
}

// A checkpoint without the servers' sections (an older loom) resumes on its world size with
// the servers' optimizer state fresh, and says so in the log.
TEST(CheckpointReshard, ParameterServerCheckpointWithoutServerStateStartsItFresh) {
  TempDir dir;
  const std::string ref = dir.path() + "/ref";
  Config cfg = ps_config(ref, 2, 2, "sgd");
  cfg.set("max_steps", int64_t(2 * kResumeAt));
  run_training(plan::read_run_plan(cfg));
  const std::string copy = dir.path() + "/copy";
  fs::copy(ref, copy, fs::copy_options::recursive);
  fs::remove_all(step_dir(copy, 2 * kResumeAt));
  const std::string file = step_dir(copy, kResumeAt) + "/rank-00000.ckpt";
  const CheckpointFile full = CheckpointFile::read(file);
  CheckpointFile older;
  for (const auto& [name, section] : full.sections()) {
    if (name.rfind("strategy.", 0) == 0) continue;
    if (section.type == SectionType::kF32) older.put_f32(name, full.f32(name));
    if (section.type == SectionType::kI64) older.put_i64(name, full.i64(name));
  }
  ASSERT_EQ(older.sections().size(), full.sections().size() - strategy_sections(file).size());
  {
    const std::vector<uint8_t> bytes = older.serialize();
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  Config resumed = cfg;
  resumed.set("output.dir", copy);
  resumed.set("train.resume", step_dir(copy, kResumeAt));
  resumed.set("log.level", std::string("info"));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_training(plan::read_run_plan(resumed)).steps, 2 * kResumeAt);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("starts fresh"), std::string::npos) << log;
  // Fresh momentum: another trajectory than the uninterrupted run's.
  EXPECT_FALSE(CheckpointFile::read(step_dir(ref, 2 * kResumeAt) + "/train.ckpt")
                   .sections()
                   .at("params")
                   .data == CheckpointFile::read(step_dir(copy, 2 * kResumeAt) + "/train.ckpt")
                                .sections()
                                .at("params")
                                .data);
}

}  // namespace
}  // namespace loom::train
