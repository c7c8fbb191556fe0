// data.validation and train.keep_best through whole training runs: per-epoch figures on the
// held-out split, the test set once at the end, the best epoch's weights, exact resume across
// the split, and bad splits refused before output.dir is touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/validation_split.h"
#include "loom/plan/comm_reader.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using loom::testing::tiny_run;
using ::testing::HasSubstr;

std::vector<nlohmann::json> epoch_lines(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["kind"] == "epoch") out.push_back(j);
    }
  return out;
}

nlohmann::json summary_of(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "summary.json");
  return nlohmann::json::parse(in);
}

// 2 workers x 2048 on the 54000 records data.validation = 0.1 leaves of Fashion-MNIST's 60000:
// 13 steps an epoch.
Config split_run(const std::string& out, int epochs) {
  Config cfg = tiny_run(2, 2048, 0);
  cfg.set("epochs", int64_t(epochs));
  cfg.set("eval", true);
  cfg.set("data.validation", 0.1);
  cfg.set("log.level", std::string("error"));
  cfg.set("output.dir", out);
  return cfg;
}

// The thread transport's two workers each compute the split from the seed and train on their
// shards of the rest: the same held-out records on both, none of them trained on, and the two
// shards of the training part disjoint. The seed, not the worker, picks the records.
TEST(Validation, SplitIsTheSameOnEveryWorkerAndNeverTrainedOn) {
  data::Dataset d;
  d.name = "numbered";
  d.count = 2000;
  d.sample_shape = {1};
  d.num_classes = 2;
  for (int64_t i = 0; i < d.count; ++i) d.features.push_back(float(i)), d.labels.push_back(0);
  auto base = std::make_shared<data::DatasetSource>(d);
  std::mutex mu;
  std::vector<int64_t> held[2];
  std::vector<int64_t> trained[2];
  auto world = comm::create_world("thread", 2, plan::read_comm_options(Config()));
  world->run([&](comm::Communicator& c) {
    data::ValidationSplit s = data::split_for_validation(d.count, 0.25, 5);
    data::LoaderOptions o;
    o.global_batch = 100;
    o.rank = c.rank();
    o.world = c.size();
    o.seed = 5;
    data::Loader loader(std::make_shared<data::SubsetSource>(base, s.train), o);
    std::vector<int64_t> mine;
    loader.start_epoch(0);
    data::Batch b;
    while (loader.next(b))
      for (int64_t i = 0; i < b.size; ++i) mine.push_back(int64_t(b.x[i]));
    std::lock_guard<std::mutex> lock(mu);
    held[c.rank()] = s.validation;
    trained[c.rank()] = mine;
  });
  ASSERT_EQ(held[0].size(), 500u);
  EXPECT_EQ(held[0], held[1]);
  std::set<int64_t> all;
  for (const auto& t : trained) {
    EXPECT_EQ(t.size(), 750u);
    for (int64_t id : t) {
      EXPECT_FALSE(std::binary_search(held[0].begin(), held[0].end(), id)) << id;
      all.insert(id);
    }
  }
  EXPECT_EQ(all.size(), 1500u);  // the two shards share no record
  EXPECT_NE(data::split_for_validation(d.count, 0.25, 6).validation, held[0]);
}

// Per-epoch figures are the validation split's; the test set is evaluated once, on the final
// weights; evaluating changes nothing the run trains.
TEST(Validation, EpochsReportTheSplitAndTheTestSetOnceAtTheEnd) {
  TempDir t;
  const std::string dir = t.file("run");
  const TrainResult r = run_training(plan::read_run_plan(split_run(dir, 2)));
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.val_samples, 6000);
  for (const EpochMetrics& m : r.epochs) {
    EXPECT_EQ(m.steps, 13);
    EXPECT_GT(m.val_acc, 0.3);
    EXPECT_LE(m.val_acc, 1.0);
    EXPECT_GT(m.val_loss, 0.0);
  }
  EXPECT_GT(r.test_acc, 0.3);
  EXPECT_GT(r.test_loss, 0.0);
  EXPECT_EQ(r.val_acc, r.epochs.back().val_acc);

  const auto lines = epoch_lines(fs::path(dir) / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lines[i]["format_version"], 2);
    EXPECT_FALSE(lines[i].contains("test_acc"));
    EXPECT_DOUBLE_EQ(lines[i]["val_acc"].get<double>(), r.epochs[i].val_acc);
    EXPECT_DOUBLE_EQ(lines[i]["val_loss"].get<double>(), r.epochs[i].val_loss);
    EXPECT_FALSE(lines[i].contains("best_epoch"));  // keep_best off
  }
  const nlohmann::json s = summary_of(dir);
  EXPECT_DOUBLE_EQ(s["test_acc"].get<double>(), r.test_acc);
  EXPECT_DOUBLE_EQ(s["test_loss"].get<double>(), r.test_loss);
  EXPECT_DOUBLE_EQ(s["val_acc"].get<double>(), r.epochs.back().val_acc);
  EXPECT_EQ(s["val_samples"], 6000);
  EXPECT_FALSE(s.contains("best_epoch"));

  // The same split without any evaluation trains the same bits.
  Config quiet = split_run("", 2);
  quiet.set("eval", false);
  const TrainResult q = run_training(plan::read_run_plan(quiet));
  EXPECT_EQ(q.final_params, r.final_params);
  EXPECT_LT(q.test_acc, 0);
  EXPECT_LT(q.epochs.back().val_acc, 0);
}

// keep_best hands back the epoch with the highest validation accuracy and the weights the run
// had at its end: those of the checkpoint written at that epoch's last step, BatchNorm running
// statistics included.
TEST(Validation, KeepBestReturnsTheBestEpochAndItsWeights) {
  TempDir t;
  const std::string dir = t.file("run");
  Config cfg = loom::testing::with_tiny_residual_graph(split_run(dir, 3));
  cfg.set("batch", int64_t(4096));
  cfg.set("data.validation", 0.2);  // 12000 held out, at least a batch per worker; 48000 / 8192:
                                    // 5 steps an epoch
  cfg.set("optim.lr", 0.2);
  cfg.set("train.keep_best", true);
  cfg.set("train.checkpoint_every", int64_t(5));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(r.epochs.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < r.epochs.size(); ++i)
    if (r.epochs[i].val_acc > r.epochs[best].val_acc ||
        (r.epochs[i].val_acc == r.epochs[best].val_acc &&
         r.epochs[i].val_loss < r.epochs[best].val_loss))
      best = i;
  EXPECT_EQ(r.best_epoch, int64_t(best + 1));
  EXPECT_EQ(r.best_val_acc, r.epochs[best].val_acc);
  EXPECT_EQ(r.best_val_loss, r.epochs[best].val_loss);

  const CheckpointFile at_best = CheckpointFile::read(
      (fs::path(dir) / "checkpoints" / checkpoint_name(5 * r.best_epoch) / "train.ckpt").string());
  EXPECT_EQ(r.best_params, at_best.f32("params"));
  ASSERT_FALSE(r.best_state.empty());
  EXPECT_EQ(r.best_state, at_best.f32("model.state"));
  if (r.best_epoch != 3) {
    EXPECT_NE(r.best_params, r.final_params);
  }

  const nlohmann::json s = summary_of(dir);
  EXPECT_EQ(s["best_epoch"], r.best_epoch);
  EXPECT_DOUBLE_EQ(s["best_val_acc"].get<double>(), r.best_val_acc);
  const auto lines = epoch_lines(fs::path(dir) / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["best_epoch"], r.best_epoch);
  EXPECT_EQ(lines[0]["best_epoch"], 1);
}

// A run resumed from a checkpoint mid-epoch 1, early in epoch 2 or at the end of epoch 1 holds
// out the same records, trains the same bits, and keeps the same best epoch (carried in the
// checkpoint, or evaluated again at an epoch's end). A resume that would hold out other
// records is refused.
TEST(Validation, ResumeAcrossTheSplitIsExact) {
  TempDir t;
  const std::string dir = t.file("run");
  Config cfg = split_run(dir, 2);
  cfg.set("train.keep_best", true);
  cfg.set("train.checkpoint_every", int64_t(5));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(full.steps, 26);
  const fs::path ck = fs::path(dir) / "checkpoints";
  for (int step : {10, 15}) {
    Config again = cfg;
    again.set("train.resume", (ck / checkpoint_name(step)).string());
    const TrainResult r = run_training(plan::read_run_plan(again));
    EXPECT_EQ(r.final_params, full.final_params) << step;
    EXPECT_EQ(r.epochs.back().val_acc, full.epochs.back().val_acc) << step;
    EXPECT_EQ(r.best_epoch, full.best_epoch) << step;
    EXPECT_EQ(r.best_params, full.best_params) << step;
    EXPECT_EQ(r.test_acc, full.test_acc) << step;
  }
  // A checkpoint at an epoch's last step is written before that epoch is evaluated: the
  // resumed run evaluates it, so a best first epoch is not lost.
  TempDir t2;
  Config at_ends = cfg;
  at_ends.set("output.dir", t2.file("run"));
  at_ends.set("train.checkpoint_every", int64_t(13));
  const TrainResult ends = run_training(plan::read_run_plan(at_ends));
  EXPECT_EQ(ends.final_params, full.final_params);
  EXPECT_EQ(ends.best_epoch, full.best_epoch);
  // From the end of epoch 1 (lost if epoch 1 is the best) and from the end of the run (lost
  // if epoch 2 is): one of the two fails if an epoch's end is not evaluated on resume.
  for (int step : {13, 26}) {
    Config from_end = at_ends;
    from_end.set("train.resume",
                 (fs::path(t2.path()) / "run" / "checkpoints" / checkpoint_name(step)).string());
    const TrainResult r = run_training(plan::read_run_plan(from_end));
    EXPECT_EQ(r.best_epoch, full.best_epoch) << step;
    EXPECT_EQ(r.best_params, full.best_params) << step;
    EXPECT_EQ(r.best_val_acc, full.best_val_acc) << step;
  }

  // 0.11 leaves 53400 records: the same 13 steps an epoch, but other records held out.
  Config other = cfg;
  other.set("data.validation", 0.11);
  other.set("train.resume", (ck / checkpoint_name(15)).string());
  try {
    run_training(plan::read_run_plan(other));
    ADD_FAILURE() << "a resume with another split was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("validation split"));
  }
}

void write_validation_shard(const std::string& path, std::vector<int64_t> shape, int classes,
                            int64_t count) {
  data::ShardWriter w(path, {data::ShardDtype::kFloat32, shape, classes, count, 0});
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<float> x(size_t(numel), 0.25f);
  for (int64_t i = 0; i < count; ++i) {
    x[0] = float(i % 7);
    w.append(int32_t(i % classes), x.data());
  }
  w.finish();
}

// Exit code 2 and the key or file named, and output.dir never created.
std::string refusal(Config cfg, const std::string& out) {
  cfg.set("output.dir", out);
  try {
    run_training(plan::read_run_plan(cfg));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    EXPECT_FALSE(fs::exists(out)) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(Validation, BadSplitsAreRefusedBeforeOutputDirIsTouched) {
  TempDir t;
  const std::string out = t.file("run");
  Config cfg = tiny_run(2, 16, 4);  // one batch per worker: 16; a global batch: 32
  cfg.set("eval", true);
  auto with = [&](double v) {
    Config c = cfg;
    c.set("data.validation", v);
    return c;
  };
  EXPECT_THAT(refusal(with(1.0), out), HasSubstr("data.validation"));
  EXPECT_THAT(refusal(with(-0.5), out), HasSubstr("outside [0, 1)"));
  // 59970 held out leaves 30 of 60000: less than one global batch.
  std::string e = refusal(with(0.9995), out);
  EXPECT_THAT(e, HasSubstr("data.validation"));
  EXPECT_THAT(e, HasSubstr("nothing left to train on"));
  // 12 held out: fewer than 2 workers x 16.
  e = refusal(with(0.0002), out);
  EXPECT_THAT(e, HasSubstr("data.validation"));
  EXPECT_THAT(e, HasSubstr("fewer than one batch per worker"));
  Config best = cfg;
  best.set("train.keep_best", true);
  EXPECT_THAT(refusal(best, out), HasSubstr("train.keep_best"));

  // A validation file that does not fit the training shards, or without training shards.
  const std::string train = t.file("train.shard"), test = t.file("test.shard"),
                    small = t.file("small.shard"), many = t.file("many.shard"),
                    ok = t.file("ok.shard");
  write_validation_shard(train, {1, 8, 8}, 10, 64);
  write_validation_shard(test, {1, 8, 8}, 10, 32);
  write_validation_shard(ok, {1, 8, 8}, 10, 32);
  write_validation_shard(small, {1, 4, 4}, 10, 32);
  write_validation_shard(many, {1, 8, 8}, 20, 32);
  Config shards = cfg;
  shards.set("data.train_shards", train);
  shards.set("data.test_shards", test);
  auto validating_on = [&](const std::string& file) {
    Config c = shards;
    c.set("data.validation", file);
    return c;
  };
  e = refusal(validating_on(small), out);
  EXPECT_THAT(e, HasSubstr(small));
  EXPECT_THAT(e, HasSubstr("validation samples of shape 1x4x4 differ"));
  e = refusal(validating_on(many), out);
  EXPECT_THAT(e, HasSubstr(many));
  EXPECT_THAT(e, HasSubstr("the validation set has 20 classes"));
  e = refusal(validating_on(t.file("missing.shard")), out);
  EXPECT_THAT(e, HasSubstr("missing.shard"));
  Config idx = cfg;
  idx.set("data.validation", ok);
  EXPECT_THAT(refusal(idx, out), HasSubstr("needs data.train_shards"));

  // The file that fits trains and validates on it.
  Config fits = validating_on(ok);
  fits.set("output.dir", std::string(""));
  const TrainResult r = run_training(plan::read_run_plan(fits));
  EXPECT_EQ(r.val_samples, 32);
  EXPECT_GE(r.epochs.back().val_acc, 0.0);
}

}  // namespace
}  // namespace loom::train
