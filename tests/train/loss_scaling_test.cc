// Dynamic loss scaling in the training loop (loss_scale.*, docs/precision.md), driven on the
// CPU in fp32 with loss_scale.mode = "dynamic" and overflows injected through
// set_gradient_fault_hook: skipped steps roll back on every worker, the scale halves and
// grows, the scaler's state resumes exactly, and without overflows a power-of-two scale
// changes no bit of the trained parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/cpu_features.h"
#include "loom/core/error.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/checkpoint_guard.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

// Two workers, Adam (whose moments and step count a skipped step must leave alone), a step
// line in metrics.jsonl after every step. scaled = false: the same run without loss scaling
// (and without the scale's parameters, which are refused when nothing is scaled).
Config scaled_run(const std::string& out, int steps, bool scaled = true) {
  Config cfg = loom::testing::tiny_run(2, 256, steps);
  cfg.set("optim.name", std::string("adam"));
  cfg.set("optim.lr", 1e-3);
  cfg.set("output.dir", out);
  cfg.set("train.log_every", int64_t(1));
  if (!scaled) {
    cfg.set("loss_scale.mode", std::string("none"));
    return cfg;
  }
  cfg.set("loss_scale.mode", std::string("dynamic"));
  cfg.set("loss_scale.initial", 1024.0);
  cfg.set("loss_scale.growth_interval", int64_t(3));
  return cfg;
}

// Makes a gradient +Inf on `rank` at the 0-based steps given, for the test's lifetime.
class InjectOverflow {
 public:
  InjectOverflow(int rank, std::set<int64_t> steps) {
    set_gradient_fault_hook(
        [rank, steps](int r, int64_t step) { return r == rank && steps.count(step) > 0; });
  }
  ~InjectOverflow() { set_gradient_fault_hook(nullptr); }
  InjectOverflow(const InjectOverflow&) = delete;
  InjectOverflow& operator=(const InjectOverflow&) = delete;
};

struct StepLine {
  int64_t step = 0, overflow_skips = 0;
  double loss_scale = 0;
};

std::vector<StepLine> step_lines(const std::string& dir) {
  std::vector<StepLine> out;
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("kind", "") != "step") continue;
    EXPECT_TRUE(j.contains("loss_scale")) << line;
    EXPECT_TRUE(j.contains("overflow_skips")) << line;
    out.push_back({j["step"].get<int64_t>(), j.value("overflow_skips", int64_t(-1)),
                   j.value("loss_scale", -1.0)});
  }
  return out;
}

// The schedule the scaler must follow, written out independently: start at `initial`, halve
// on an overflowed step (not below 1), double after `interval` clean steps in a row.
std::vector<double> expected_scales(double initial, int64_t interval, int steps,
                                    const std::set<int64_t>& overflows) {
  std::vector<double> after;
  double s = initial;
  int64_t streak = 0;
  for (int64_t i = 0; i < steps; ++i) {
    if (overflows.count(i)) {
      s = std::max(1.0, s / 2);
      streak = 0;
    } else if (++streak == interval) {
      s *= 2;
      streak = 0;
    }
    after.push_back(s);
  }
  return after;
}

TEST(LossScaling, PowerOfTwoScalesLeaveTheTrainedBitsAsUnscaledTraining) {
  Config plain = scaled_run("", 12, /*scaled=*/false);
  const std::vector<float> reference = run_training(plan::read_run_plan(plain)).final_params;
  // 2^10, doubling every 3 steps to 2^14: every gradient is scaled and unscaled exactly.
  const std::vector<float> scaled =
      run_training(plan::read_run_plan(scaled_run("", 12))).final_params;
  ASSERT_EQ(scaled.size(), reference.size());
  EXPECT_EQ(scaled, reference);
  // With train.accumulate each micro-batch's gradients are unscaled before they are summed:
  // the same bits again.
  Config plain_acc = plain, scaled_acc = scaled_run("", 12);
  plain_acc.set("train.accumulate", int64_t(2));
  scaled_acc.set("train.accumulate", int64_t(2));
  EXPECT_EQ(run_training(plan::read_run_plan(scaled_acc)).final_params,
            run_training(plan::read_run_plan(plain_acc)).final_params);
  // A scale that is not a power of two may round twice per gradient: equal to float rounding
  // (and far from the 1000x gradients of a missing unscale).
  Config odd = scaled_run("", 12);
  odd.set("loss_scale.initial", 1000.0);
  odd.set("loss_scale.growth_interval", int64_t(100));
  const std::vector<float> rounded = run_training(plan::read_run_plan(odd)).final_params;
  EXPECT_LE(loom::testing::max_abs_diff(rounded, reference), 1e-5);
}

// Rounding to nearest even commutes with a power-of-two scale, so bf16 products on scaled
// gradients round to the scaled bits of the unscaled ones: the same parameters again.
TEST(LossScaling, PowerOfTwoScalesLeaveBf16TrainingBitsAlone) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16: no bf16 products";
  Config plain = scaled_run("", 12, /*scaled=*/false);
  plain.set("precision", std::string("bf16"));
  Config scaled = scaled_run("", 12);
  scaled.set("precision", std::string("bf16"));
  const std::vector<float> reference = run_training(plan::read_run_plan(plain)).final_params;
  EXPECT_EQ(run_training(plan::read_run_plan(scaled)).final_params, reference);
  Config fp32 = plain;
  fp32.set("precision", std::string("fp32"));
  EXPECT_NE(run_training(plan::read_run_plan(fp32)).final_params, reference);  // bf16 really ran
}

TEST(LossScaling, AnOverflowOnOneWorkerSkipsTheStepOnAllAndHalvesTheScale) {
  TempDir dir;
  const std::set<int64_t> bad = {4, 5, 9};
  {
    InjectOverflow inject(1, bad);  // rank 1 only: rank 0 must skip too
    const TrainResult r = run_training(plan::read_run_plan(scaled_run(dir.path(), 12)));
    EXPECT_EQ(r.steps, 12);  // a skipped step still counts as a step (its batch is used up)
  }
  const std::vector<StepLine> lines = step_lines(dir.path());
  ASSERT_EQ(lines.size(), 12u);
  const std::vector<double> want = expected_scales(1024, 3, 12, bad);
  int64_t skips = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    skips += bad.count(int64_t(i)) ? 1 : 0;
    EXPECT_EQ(lines[i].step, int64_t(i) + 1);
    EXPECT_EQ(lines[i].loss_scale, want[i]) << "after step " << i;
    EXPECT_EQ(lines[i].overflow_skips, skips) << "after step " << i;
  }
  // The schedule really moved both ways.
  EXPECT_LT(*std::min_element(want.begin(), want.end()), 1024);
  EXPECT_GT(*std::max_element(want.begin(), want.end()), 1024);
}

// The state after a skipped step is the state before it: parameters (train.ckpt) and every
// rank's optimizer state and step count (rank files) of a run whose 5th step overflowed equal
// those of the same run stopped after 4 steps.
TEST(LossScaling, ASkippedStepLeavesParametersAndOptimizerUnchanged) {
  TempDir skipped_dir, short_dir;
  Config skipped = scaled_run(skipped_dir.path(), 5);
  skipped.set("train.checkpoint_every", int64_t(5));
  {
    InjectOverflow inject(0, {4});
    run_training(plan::read_run_plan(skipped));
  }
  Config shorter = scaled_run(short_dir.path(), 4);
  shorter.set("train.checkpoint_every", int64_t(4));
  run_training(plan::read_run_plan(shorter));
  const fs::path a = fs::path(skipped_dir.path()) / "checkpoints" / checkpoint_name(5);
  const fs::path b = fs::path(short_dir.path()) / "checkpoints" / checkpoint_name(4);
  EXPECT_EQ(CheckpointFile::read((a / "train.ckpt").string()).f32("params"),
            CheckpointFile::read((b / "train.ckpt").string()).f32("params"));
  for (const char* rank : {"rank-00000.ckpt", "rank-00001.ckpt"}) {
    const CheckpointFile fa = CheckpointFile::read((a / rank).string());
    const CheckpointFile fb = CheckpointFile::read((b / rank).string());
    EXPECT_EQ(fa.i64("optim.steps", 1), fb.i64("optim.steps", 1)) << rank;
    int buffers = 0;
    for (const auto& [name, section] : fa.sections()) {
      if (name.rfind("optim.", 0) != 0 || name == "optim.steps") continue;
      if (name == "optim.owned") {  // the shard layout: which elements this rank updates
        EXPECT_EQ(fa.i64(name), fb.i64(name)) << rank;
        continue;
      }
      ++buffers;
      EXPECT_EQ(fa.f32(name), fb.f32(name)) << rank << " " << name;
    }
    EXPECT_GE(buffers, 2) << rank << ": Adam's two moments";
  }
  // The skipped run's checkpoint holds the halved scale and the skip.
  const CheckpointFile t = CheckpointFile::read((a / "train.ckpt").string());
  EXPECT_EQ(t.f64("loss_scale", 1)[0], expected_scales(1024, 3, 5, {4}).back());
  EXPECT_EQ(t.i64("loss_scale.streak_skips", 2)[1], 1);
}

TEST(LossScaling, TheScalerResumesExactly) {
  TempDir dir;
  const std::set<int64_t> bad = {2, 6, 7};
  InjectOverflow inject(1, bad);
  Config cfg = scaled_run(dir.path(), 12);
  cfg.set("train.checkpoint_every", int64_t(4));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  const std::vector<StepLine> full_lines = step_lines(dir.path());
  ASSERT_EQ(full_lines.size(), 12u);
  for (int from : {4, 8}) {
    Config again = cfg;
    again.set("train.resume",
              (fs::path(dir.path()) / "checkpoints" / checkpoint_name(from)).string());
    EXPECT_EQ(run_training(plan::read_run_plan(again)).final_params, full.final_params)
        << "from step " << from;
    const std::vector<StepLine> lines = step_lines(dir.path());
    ASSERT_EQ(lines.size(), 12u) << "from step " << from;
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].loss_scale, full_lines[i].loss_scale) << from << " " << i;
      EXPECT_EQ(lines[i].overflow_skips, full_lines[i].overflow_skips) << from << " " << i;
    }
  }
}

TEST(LossScaling, AResumeMustAgreeOnLossScaling) {
  TempDir dir;
  Config plain = scaled_run(dir.path(), 4, /*scaled=*/false);
  plain.set("train.checkpoint_every", int64_t(2));
  run_training(plan::read_run_plan(plain));
  Config scaled = scaled_run(dir.path(), 4);
  scaled.set("train.resume", (fs::path(dir.path()) / "checkpoints").string());
  try {
    run_training(plan::read_run_plan(scaled));
    FAIL() << "a checkpoint without loss scaling resumed with it";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("without dynamic loss scaling"), std::string::npos)
        << e.what();
  }
}

TEST(LossScaling, BadSettingsAreConfigErrorsNamingTheKey) {
  Config cfg = scaled_run("", 2);
  cfg.set("loss_scale.mode", std::string("static"));
  try {
    run_training(plan::read_run_plan(cfg));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("loss_scale.mode"), std::string::npos) << e.what();
  }
  cfg = scaled_run("", 2);
  cfg.set("loss_scale.max", 512.0);  // below initial 1024
  try {
    run_training(plan::read_run_plan(cfg));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("loss_scale.initial"), std::string::npos) << e.what();
  }
  cfg = scaled_run("", 2);
  cfg.set("loss_scale.growth_interval", int64_t(0));
  EXPECT_THROW(run_training(plan::read_run_plan(cfg)), ConfigError);
}

}  // namespace
}  // namespace loom::train
