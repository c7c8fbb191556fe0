// What a run may write into (output_dir.h), the run writer's failures, and the progress line's
// ETA: no training runs here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/train/output_dir.h"
#include "loom/train/progress.h"
#include "loom/train/run_writer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

void touch(const fs::path& p, const std::string& text = "x\n") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OutputDir, ARunsResultsAreFoundAndRefusedWithTheWaysOut) {
  TempDir t;
  const std::string dir = t.file("run");
  EXPECT_TRUE(run_results_in(dir).empty());  // no such directory yet
  fs::create_directories(dir);
  touch(fs::path(dir) / "notes.txt");  // not a result
  EXPECT_TRUE(run_results_in(dir).empty());
  EXPECT_NO_THROW(refuse_existing_run(dir, "cfg.toml:3"));
  touch(fs::path(dir) / "metrics.jsonl");
  EXPECT_EQ(run_results_in(dir), std::vector<std::string>{"metrics.jsonl"});
  try {
    refuse_existing_run(dir, "cfg.toml:3");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_THAT(e.what(), HasSubstr("cfg.toml:3"));
    EXPECT_THAT(e.what(), HasSubstr(dir));
    EXPECT_THAT(e.what(), HasSubstr("--force"));
    EXPECT_THAT(e.what(), HasSubstr("{n}"));
    EXPECT_THAT(e.what(), Not(HasSubstr("--resume")));  // nothing to resume
  }
  fs::create_directories(fs::path(dir) / "checkpoints");
  try {
    refuse_existing_run(dir, "default");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--resume " + dir));
  }
}

TEST(OutputDir, NumberedDirectoriesTakeTheFirstFreeNumber) {
  TempDir t;
  const std::string pattern = t.file("mlp-{n}");
  EXPECT_EQ(numbered_output_dir(pattern), t.file("mlp-1"));
  touch(fs::path(t.file("mlp-1")) / "summary.json");
  fs::create_directories(t.file("mlp-2"));  // empty: free
  EXPECT_EQ(numbered_output_dir(pattern), t.file("mlp-2"));
  EXPECT_EQ(numbered_output_dir(t.file("plain")), t.file("plain"));
}

TEST(OutputDir, ResumePathsLeadToTheirRunDirectory) {
  TempDir t;
  const fs::path run = fs::path(t.path()) / "copy";
  touch(run / "checkpoints" / "step-000000000010" / "train.ckpt");
  EXPECT_TRUE(same_dir(resume_run_dir(run.string()), run.string()));
  EXPECT_TRUE(same_dir(resume_run_dir((run / "checkpoints").string()), run.string()));
  EXPECT_TRUE(same_dir(resume_run_dir((run / "checkpoints/").string()), run.string()));
  EXPECT_TRUE(
      same_dir(resume_run_dir((run / "checkpoints" / "step-000000000010").string()), run.string()));
  EXPECT_TRUE(same_dir(run.string() + "/", run.string()));
  EXPECT_FALSE(same_dir(run.string(), t.path()));
}

TEST(OutputDir, ForceClearsOnlyTheResults) {
  TempDir t;
  const fs::path run = fs::path(t.path()) / "run";
  touch(run / "config.toml");
  touch(run / "summary.json");
  touch(run / "checkpoints" / "step-000000000900" / "train.ckpt");
  touch(run / "notes.txt");
  clear_run_results(run.string());
  EXPECT_TRUE(run_results_in(run.string()).empty());
  EXPECT_TRUE(fs::exists(run / "notes.txt"));
}

TEST(RunWriter, NothingIsTouchedBeforeOpen) {
  TempDir t;
  const fs::path run = fs::path(t.path()) / "run";
  {
    RunWriter w(run.string());
    EXPECT_FALSE(fs::exists(run));
  }
  touch(run / "metrics.jsonl", "{\"epoch\":1}\n");
  RunWriter w(run.string());
  EXPECT_EQ(read(run / "metrics.jsonl"), "{\"epoch\":1}\n");
  w.open();
  EXPECT_EQ(read(run / "metrics.jsonl"), "");
}

TEST(RunWriter, ResumeKeepsEpochLinesThroughTheEpochAndStepLinesThroughTheStep) {
  TempDir t;
  const fs::path run = fs::path(t.path()) / "run";
  touch(run / "metrics.jsonl",
        "{\"kind\":\"step\",\"epoch\":1,\"step\":5}\n"
        "{\"kind\":\"epoch\",\"epoch\":1}\n"
        "{\"kind\":\"step\",\"epoch\":2,\"step\":10}\n"
        "{\"kind\":\"step\",\"epoch\":2,\"step\":15}\n"
        "{\"epoch\":2}\n"
        "{\"kind\":\"step\",\"epo");
  RunWriter w(run.string(), true);
  w.open();
  w.keep_epochs_through(1, 12);
  EXPECT_EQ(read(run / "metrics.jsonl"),
            "{\"kind\":\"step\",\"epoch\":1,\"step\":5}\n"
            "{\"kind\":\"epoch\",\"epoch\":1}\n"
            "{\"kind\":\"step\",\"epoch\":2,\"step\":10}\n");
}

// A full disk: /dev/full takes the open and fails every write, as a file system out of space
// does. Each of the three results says so instead of staying empty. config.toml and summary.json
// are written whole through a temporary (core::write_file_atomically names it <file>.tmp.<pid>),
// so that is where the full disk is planted.
TEST(RunWriter, AFullDiskIsAnErrorForEveryResult) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TempDir t;
  const fs::path run = fs::path(t.path()) / "run";
  fs::create_directories(run);
  const std::string tmp = ".tmp." + std::to_string(::getpid());
  fs::create_symlink("/dev/full", run / ("config.toml" + tmp));
  fs::create_symlink("/dev/full", run / "metrics.jsonl");
  fs::create_symlink("/dev/full", run / ("summary.json" + tmp));
  RunWriter w(run.string());
  w.open();
  try {
    w.write_config("a = 1\n");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("config.toml: cannot write"));
  }
  try {
    w.append_metrics({{"epoch", 1}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("metrics.jsonl: write failed"));
  }
  try {
    w.write_summary({{"steps", 1}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("summary.json: cannot write"));
  }
  EXPECT_FALSE(fs::exists(run / "summary.json"));
  EXPECT_FALSE(fs::exists(run / "config.toml"));
}

// Under max_steps the ETA counts the steps the run will take, not the full epochs.
TEST(Progress, EtaCountsTheStepsMaxStepsLeaves) {
  // 3 epochs of 100 steps, but max_steps = 10: the run trains 1 epoch of 10 steps.
  Progress p(ProgressMode::kLines, 1, 100, 1000, 10);
  ::testing::internal::CaptureStderr();
  for (int64_t s = 0; s < 10; ++s) p.step(0, s, 0.5, 1000.0);  // 1 step per second
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("epoch 1/1  50%  1000 samples/s  ETA 0:05"));
  EXPECT_THAT(out, HasSubstr("epoch 1/1 100%  1000 samples/s  ETA 0:00"));
}

}  // namespace
}  // namespace loom::train
