// codec = "auto"'s check after the warm-up window, on whole training runs over the thread
// transport. The test hooks make the outcome known whatever this machine's speed: the start-up
// reads the link 1000x faster than it measured (so fp32 through the allreduce is chosen: no
// codec pays on a free link), and the check window counts 50 ms of exposed communication per
// step more than it measured (a link that slowed down), so the corrected model ranks a codec
// that sends fewer bytes first.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/train/checkpoint.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using loom::testing::tiny_run;

// 2 workers x batch 16, `steps` steps, codec = "auto" with lossy codecs allowed on this
// network (it has no measured accuracy deltas), and the hooks above.
Config forced(int steps, const std::string& out) {
  Config cfg = tiny_run(2, 16, steps);
  cfg.set("codec", std::string("auto"));
  cfg.set("auto.lossy", true);
  cfg.set("auto.test_probe_link_factor", 1000.0);
  cfg.set("auto.test_window_comm_s", 0.05);
  cfg.set("output.dir", out);
  return cfg;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AutoRevisionRun, AMeasuredStepFarFromThePredictionSwitchesOnceAndTrainsOn) {
  TempDir dir;
  const TrainResult r = run_training(plan::read_run_plan(forced(60, dir.path())));
  EXPECT_EQ(r.steps, 60);  // it trained on after the switch
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.epochs[0].train_loss));
  EXPECT_LT(r.epochs[0].train_loss, std::log(10.0));  // below the untrained loss

  const nlohmann::json a = read_json(fs::path(dir.path()) / "summary.json")["auto"];
  EXPECT_EQ(a["chosen"]["codec"], "fp32");
  const nlohmann::json& v = a["revision"];
  ASSERT_EQ(v["outcome"], "switched") << v.dump(1);
  // The default window: 20 steps after 10 of warm-up, checked once at step 30.
  EXPECT_EQ(v["window"]["first_step"], 10);
  EXPECT_EQ(v["window"]["steps"], 20);
  EXPECT_EQ(v["before"]["codec"], "fp32");
  const std::string after = v["after"]["codec"];
  EXPECT_NE(after, "fp32");
  EXPECT_GE(v["measured"]["step_s"].get<double>(), 0.05);
  EXPECT_GT(std::abs(v["error"].get<double>()), 0.15);
  EXPECT_GT(v["corrected"]["link_factor"].get<double>(), 1.0);
  EXPECT_EQ(a["check"]["prediction"], "the switched choice, corrected figures");

  // config.toml holds what ran last, and what the check changed.
  const std::string cfg = read_text(fs::path(dir.path()) / "config.toml");
  EXPECT_NE(cfg.find("codec = \"" + after + "\""), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("auto.revised = \"fp32, allreduce, buckets"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find(" at step 30\""), std::string::npos) << cfg;
  EXPECT_GT(r.epochs[0].bytes_sent, 0);  // the replaced strategy's figures count too
}

TEST(AutoRevisionRun, ARunTooShortForTheWindowSaysItWasNotChecked) {
  TempDir dir;
  run_training(plan::read_run_plan(forced(25, dir.path())));
  const nlohmann::json a = read_json(fs::path(dir.path()) / "summary.json")["auto"];
  EXPECT_EQ(a["revision"]["outcome"], "not checked");
  EXPECT_NE(a["revision"]["reason"].get<std::string>().find("the run ends at step 25"),
            std::string::npos);
  EXPECT_EQ(a["chosen"]["codec"], "fp32");
}

TEST(AutoRevisionRun, CheckStepsZeroTurnsTheCheckOff) {
  TempDir dir;
  Config cfg = forced(40, dir.path());
  cfg.set("auto.check_steps", int64_t(0));
  run_training(plan::read_run_plan(cfg));
  const nlohmann::json a = read_json(fs::path(dir.path()) / "summary.json")["auto"];
  EXPECT_EQ(a["revision"]["outcome"], "not checked");
  EXPECT_EQ(read_text(fs::path(dir.path()) / "config.toml").find("auto.revised"),
            std::string::npos);
}

// The checkpoints from the switch on record the new choice: a resume on the same machine keeps
// it (not the start-up's), rebuilds that strategy with its saved state, and reaches the bits
// of the run it resumes. One before the switch keeps the choice it recorded.
TEST(AutoRevisionRun, AResumeKeepsTheSwitchedChoiceAndReachesTheSameBits) {
  TempDir dir;
  Config cfg = forced(50, dir.path());
  cfg.set("train.checkpoint_every", int64_t(10));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const nlohmann::json v = read_json(fs::path(dir.path()) / "summary.json")["auto"]["revision"];
  ASSERT_EQ(v["outcome"], "switched") << v.dump(1);
  const std::string after = v["after"]["codec"];
  const fs::path ck = fs::path(dir.path()) / "checkpoints";

  Config again = cfg;
  again.set("train.resume", (ck / checkpoint_name(40)).string());
  const TrainResult resumed = run_training(plan::read_run_plan(again));
  EXPECT_EQ(resumed.final_params, full.final_params);
  const nlohmann::json kept = nlohmann::json::parse(resumed.auto_choice);
  EXPECT_EQ(kept["chosen"]["codec"], after);
  EXPECT_NE(kept["chosen"]["revised"].get<std::string>().find("at step 30"), std::string::npos);
  EXPECT_NE(kept["kept_from_checkpoint"].get<std::string>().find(checkpoint_name(40)),
            std::string::npos);

  // The checkpoint of the switch's own step is written again after the switch: a resume from
  // it runs the new choice from there, as the run did.
  Config at = cfg;
  at.set("train.resume", (ck / checkpoint_name(30)).string());
  const TrainResult from_switch = run_training(plan::read_run_plan(at));
  EXPECT_EQ(nlohmann::json::parse(from_switch.auto_choice)["chosen"]["codec"], after);
  EXPECT_EQ(from_switch.final_params, full.final_params);

  Config before = cfg;
  before.set("train.resume", (ck / checkpoint_name(20)).string());
  const TrainResult early = run_training(plan::read_run_plan(before));
  EXPECT_EQ(nlohmann::json::parse(early.auto_choice)["chosen"]["codec"], "fp32");
}

// The choice belongs to the machine it was made on (CPU | transport | ranks): a resume on
// another world size decides again (here one worker, which has nothing to choose) instead of
// keeping the checkpoint's, and resumes the checkpoint's parameters all the same.
TEST(AutoRevisionRun, AResumeOnAnotherWorldSizeDecidesAgain) {
  TempDir dir;
  Config cfg = forced(25, dir.path());
  cfg.set("train.checkpoint_every", int64_t(10));
  run_training(plan::read_run_plan(cfg));
  const fs::path ck = fs::path(dir.path()) / "checkpoints" / checkpoint_name(20);
  ASSERT_TRUE(fs::exists(ck));
  Config one = cfg;
  one.set("workers", int64_t(1));
  one.set("batch", int64_t(32));  // the same global batch
  one.set("train.resume", ck.string());
  const TrainResult r = run_training(plan::read_run_plan(one));
  EXPECT_EQ(r.steps, 25);
  const nlohmann::json a = nlohmann::json::parse(r.auto_choice);
  EXPECT_FALSE(a.contains("kept_from_checkpoint")) << a.dump();
  EXPECT_EQ(a["reason"], "one worker exchanges nothing");
  const std::string saved = read_text(fs::path(dir.path()) / "config.toml");
  EXPECT_NE(saved.find("| 1 ranks\""), std::string::npos) << saved;
}

}  // namespace
}  // namespace loom::train
