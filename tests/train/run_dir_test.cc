// A run never destroys an earlier one, resumes write where they were pointed, the bookkeeping of
// summary.json and metrics.jsonl, and the data sets that are refused before training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"
#include "loom/core/log.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/train/checkpoint.h"
#include "loom/train/output_dir.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using loom::testing::tiny_run;
using ::testing::HasSubstr;

Config run_into(const std::string& dir, int steps = 10) {
  Config cfg = tiny_run(1, 64, steps);
  cfg.set("output.dir", dir);
  cfg.set("log.level", std::string("error"));
  return cfg;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<nlohmann::json> lines_of(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The three result files' contents, to show that nothing touched them.
std::string results_of(const std::string& dir) {
  return read(fs::path(dir) / "config.toml") + "|" + read(fs::path(dir) / "metrics.jsonl") + "|" +
         read(fs::path(dir) / "summary.json");
}

TEST(RunDir, ASecondRunIntoTheSameDirectoryIsRefusedNamingIt) {
  TempDir t;
  const std::string dir = t.file("run");
  run_training(plan::read_run_plan(run_into(dir)));
  const std::string before = results_of(dir);
  try {
    run_training(plan::read_run_plan(run_into(dir, 20)));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_THAT(e.what(), HasSubstr(dir));
    EXPECT_THAT(e.what(), HasSubstr("already holds a run"));
  }
  EXPECT_EQ(results_of(dir), before);
  // --force replaces it.
  TrainOptions force;
  force.force = true;
  const TrainResult r = run_training(plan::read_run_plan(run_into(dir, 20)), force);
  EXPECT_EQ(r.steps, 20);
  EXPECT_EQ(nlohmann::json::parse(read(fs::path(dir) / "summary.json"))["steps"], 20);
}

// Each of these keys is checked after the data is loaded, by the layer that reads it: the
// earlier run's files must come through every one of them untouched, even under --force.
TEST(RunDir, AConfigThatFailsALateCheckLeavesTheEarlierRunAsItWas) {
  TempDir t;
  const std::string dir = t.file("run");
  Config good = run_into(dir);
  good.set("train.checkpoint_every", int64_t(5));
  run_training(plan::read_run_plan(good));
  const std::string before = results_of(dir);
  ASSERT_FALSE(read(fs::path(dir) / "metrics.jsonl").empty());
  TrainOptions force;
  force.force = true;
  for (const char* bad :
       {"codec=gzip", "sync=gossip", "model=rnn", "optim.name=lamb", "lr.schedule=linear",
        "mlp.dropout=1.5", "optim.lr=-1", "train.nan_policy=retry"}) {
    Config cfg = run_into(dir);
    cfg.set_override(bad);
    EXPECT_THROW(run_training(plan::read_run_plan(cfg), force), ConfigError) << bad;
    EXPECT_EQ(results_of(dir), before) << bad;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "checkpoints")) << bad;
    // A resume with the same bad key leaves the run too.
    cfg.set("train.resume", dir);
    EXPECT_THROW(run_training(plan::read_run_plan(cfg)), ConfigError) << bad;
    EXPECT_EQ(results_of(dir), before) << bad;
  }
}

TEST(RunDir, NumberedDirectoriesNeverReuseARun) {
  TempDir t;
  const TrainResult a = run_training(plan::read_run_plan(run_into(t.file("mlp-{n}"))));
  const TrainResult b = run_training(plan::read_run_plan(run_into(t.file("mlp-{n}"))));
  EXPECT_EQ(a.output_dir, t.file("mlp-1"));
  EXPECT_EQ(b.output_dir, t.file("mlp-2"));
  EXPECT_TRUE(fs::exists(fs::path(t.file("mlp-2")) / "summary.json"));
  // config.toml names the directory the run wrote into.
  EXPECT_THAT(read(fs::path(t.file("mlp-2")) / "config.toml"), HasSubstr("mlp-2"));
}

// 2 workers x batch 2048: 14 steps per epoch; checkpoints every 5 steps.
Config two_epochs(const std::string& dir) {
  Config cfg = run_into(dir, 0);
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(2048));
  cfg.set("max_steps", int64_t(0));
  cfg.set("epochs", int64_t(2));
  cfg.set("train.checkpoint_every", int64_t(5));
  cfg.set("train.log_every", int64_t(4));
  return cfg;
}

TEST(RunDir, ResumingACopyWritesIntoTheCopy) {
  TempDir t;
  const std::string orig = t.file("orig"), copy = t.file("copy");
  Config first = two_epochs(orig);
  first.set("max_steps", int64_t(20));  // stops in epoch 2, checkpoint at step 20
  run_training(plan::read_run_plan(first));
  fs::copy(orig, copy, fs::copy_options::recursive);
  const std::string before = results_of(orig);
  // What `loom train --resume COPY` does: the checkpoint's config, which names the original.
  const std::string ck = find_latest_checkpoint(copy);
  Config cfg = Config::from_string(checkpoint_config_text(ck), "ckpt");
  EXPECT_EQ(cfg.get_string("output.dir", ""), orig);
  cfg.set("max_steps", int64_t(0));
  cfg.set("train.resume", copy);
  // Pointed at the copy but told to write into the original: refused.
  EXPECT_THROW(run_training(plan::read_run_plan(cfg)), ConfigError);
  cfg.set("output.dir", resume_run_dir(copy));
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  EXPECT_EQ(results_of(orig), before);
  EXPECT_EQ(r.output_dir, copy);
  // The whole run's figures: 2 epochs, 28 steps, though this process ran part of epoch 2 only.
  const nlohmann::json s = nlohmann::json::parse(read(fs::path(copy) / "summary.json"));
  EXPECT_EQ(s["epochs"], 2);
  EXPECT_EQ(s["steps"], 28);
  EXPECT_EQ(r.epochs_done, 2);
  // Step lines every 4 steps across the resume, none twice, and an epoch line per epoch.
  std::vector<int64_t> steps;
  int epochs = 0;
  for (const auto& j : lines_of(fs::path(copy) / "metrics.jsonl")) {
    if (j["kind"] == "step") steps.push_back(j["step"]);
    if (j["kind"] == "epoch") ++epochs;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8, 12, 16, 20, 24, 28}));
  EXPECT_EQ(epochs, 2);
}

TEST(RunDir, SummaryHasWallTimeVersionAndLossAndNullsWhatWasNotEvaluated) {
  TempDir t;
  const std::string dir = t.file("run");
  run_training(plan::read_run_plan(run_into(dir, 12)));
  const nlohmann::json s = nlohmann::json::parse(read(fs::path(dir) / "summary.json"));
  EXPECT_TRUE(s["test_acc"].is_null());  // eval = false
  EXPECT_GT(s["wall_s"].get<double>(), 0.0);
  EXPECT_FALSE(s["loom_version"].get<std::string>().empty());
  EXPECT_GT(s["train_loss"].get<double>(), 0.0);
  EXPECT_LT(s["train_loss"].get<double>(), 3.0);
  EXPECT_EQ(s["epochs"], 1);
  const auto lines = lines_of(fs::path(dir) / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 1u);  // 12 steps, a step line every 50: the epoch line alone
  EXPECT_EQ(lines[0]["kind"], "epoch");
  // The test set is never evaluated per epoch; without a validation split there is no
  // per-epoch held-out figure at all.
  EXPECT_FALSE(lines[0].contains("test_acc"));
  EXPECT_TRUE(lines[0]["val_acc"].is_null());
  EXPECT_TRUE(lines[0]["val_loss"].is_null());
  EXPECT_EQ(lines[0]["format_version"], 2);
}

// Each warning about a corrupt checkpoint once, though `loom train --resume` looks twice.
TEST(RunDir, ACorruptCheckpointIsReportedOnce) {
  TempDir t;
  const std::string dir = t.file("run");
  Config cfg = run_into(dir, 10);
  cfg.set("train.checkpoint_every", int64_t(5));
  run_training(plan::read_run_plan(cfg));
  const fs::path newest = fs::path(dir) / "checkpoints" / checkpoint_name(10) / "train.ckpt";
  ASSERT_TRUE(fs::exists(newest));
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  set_log_level(LogLevel::kWarn);
  ::testing::internal::CaptureStderr();
  const std::string found = find_latest_checkpoint(dir);
  EXPECT_EQ(find_latest_checkpoint(dir), found);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(found, HasSubstr(checkpoint_name(5)));
  size_t n = 0;
  for (size_t at = err.find("skipping checkpoint"); at != std::string::npos;
       at = err.find("skipping checkpoint", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << err;
}

// ---- data sets refused before training -------------------------------------------------

// Sets the first feature of a float32 shard's last record to `value` and rewrites the CRCs
// that cover it, as a shard written by another tool (or an older loom) could hold it: loom's
// writer refuses NaN and Inf, so the reader's own check needs such a file made by hand.
void poison_last_record(const std::string& path, float value) {
  std::vector<char> b;
  {
    std::ifstream in(path, std::ios::binary);
    b.assign(std::istreambuf_iterator<char>(in), {});
  }
  data::ShardHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  ASSERT_EQ(h.num_chunks, 1u) << "a small shard: one chunk";
  std::memcpy(b.data() + h.data_offset + (h.count - 1) * h.record_bytes + 4, &value, 4);
  const uint32_t chunk = core::crc32c(b.data() + h.data_offset, h.count * h.record_bytes);
  std::memcpy(b.data() + sizeof h, &chunk, 4);
  h.table_crc = core::crc32c(&chunk, 4);
  h.header_crc = core::crc32c(&h, offsetof(data::ShardHeader, header_crc));
  std::memcpy(b.data(), &h, sizeof h);
  std::ofstream(path, std::ios::binary).write(b.data(), std::streamsize(b.size()));
}

void write_shard(const std::string& path, std::vector<int64_t> shape, int classes, int64_t count,
                 float poison = 0) {
  {
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
  if (poison != 0) poison_last_record(path, float((count - 1) % 7) + poison);
}

std::string train_error(const std::string& train, const std::string& test) {
  Config cfg = tiny_run(1, 16, 4);
  cfg.set("eval", true);
  cfg.set("data.train_shards", train);
  cfg.set("data.test_shards", test);
  try {
    run_training(plan::read_run_plan(cfg));
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    return e.what();
  }
  return "(no error)";
}

TEST(RunDir, ATestSetThatDoesNotFitTheTrainingSetIsRefused) {
  TempDir t;
  const std::string train = t.file("train.shard");
  write_shard(train, {1, 8, 8}, 10, 64);
  const std::string ok = t.file("ok.shard");
  write_shard(ok, {1, 8, 8}, 10, 32);
  EXPECT_EQ(train_error(train, ok), "(no error)");

  const std::string small = t.file("small.shard"), wide = t.file("wide.shard"),
                    flat = t.file("flat.shard"), many = t.file("many.shard"),
                    few = t.file("few.shard"), empty = t.file("empty.shard"),
                    nan = t.file("nan.shard"), inf = t.file("inf.shard");
  write_shard(small, {1, 4, 4}, 10, 32);
  write_shard(wide, {1, 8, 9}, 10, 32);
  write_shard(flat, {64}, 10, 32);
  write_shard(many, {1, 8, 8}, 20, 32);
  write_shard(few, {1, 8, 8}, 4, 32);
  write_shard(empty, {1, 8, 8}, 10, 0);
  write_shard(nan, {1, 8, 8}, 10, 32, NAN);
  write_shard(inf, {1, 8, 8}, 10, 32, INFINITY);
  for (const auto& bad : {small, wide, flat}) {
    const std::string e = train_error(train, bad);
    EXPECT_THAT(e, HasSubstr(bad));
    EXPECT_THAT(e, HasSubstr("differ from the training samples' 1x8x8"));
  }
  EXPECT_THAT(train_error(train, many),
              HasSubstr("the test set has 20 classes, the training set 10"));
  EXPECT_THAT(train_error(train, few), HasSubstr("the test set has 4 classes"));
  EXPECT_THAT(train_error(train, empty), HasSubstr("the test set is empty"));
  EXPECT_THAT(train_error(train, nan), HasSubstr("test record 31 holds a NaN or Inf"));
  EXPECT_THAT(train_error(train, inf), HasSubstr("test record 31 holds a NaN or Inf"));
}

TEST(RunDir, AClassCountAboveDataMaxClassesIsRefused) {
  TempDir t;
  const std::string train = t.file("train.shard"), test = t.file("test.shard");
  write_shard(train, {4}, 70000, 16);
  write_shard(test, {4}, 70000, 16);
  const std::string e = train_error(train, test);
  EXPECT_THAT(e, HasSubstr("70000 classes, more than data.max_classes = 65536"));
  Config cfg = tiny_run(1, 16, 2);
  cfg.set("data.train_shards", train);
  cfg.set("data.test_shards", test);
  cfg.set("data.max_classes", int64_t(70000));
  cfg.set_override("mlp.hidden=[8]");
  EXPECT_EQ(run_training(plan::read_run_plan(cfg)).steps,
            1);  // 16 records, batch 16: one step per epoch
}

}  // namespace
}  // namespace loom::train
