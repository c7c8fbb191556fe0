#include "loom/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/plan/optim_reader.h"

namespace loom::optim {
namespace {

using Kind = LrSchedule::Kind;

TEST(LrSchedule, Constant) {
  LrSchedule s(Kind::kConstant, 0.05, 100, 1000);
  for (int64_t step : {0, 1, 99, 100, 999, 5000}) EXPECT_DOUBLE_EQ(s.at(step), 0.05) << step;
}

TEST(LrSchedule, StepDecaysEveryStepEpochs) {
  // 10 steps per epoch, decay by 0.5 every 2 epochs = every 20 steps.
  LrSchedule s(Kind::kStep, 0.1, 10, 1000, 0.0, 2.0, 0.5);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(19), 0.1);
  EXPECT_DOUBLE_EQ(s.at(20), 0.05);
  EXPECT_DOUBLE_EQ(s.at(39), 0.05);
  EXPECT_DOUBLE_EQ(s.at(40), 0.025);
  EXPECT_DOUBLE_EQ(s.at(65), 0.0125);
}

TEST(LrSchedule, CosineEndpointsAndMiddle) {
  // lr(t) = min + (base - min) (1 + cos(pi t / T)) / 2, T = 100 (Loshchilov & Hutter 2017).
  LrSchedule s(Kind::kCosine, 0.1, 10, 100, 0.0, 10.0, 0.1, 0.001);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(50), 0.0505, 1e-12);
  EXPECT_NEAR(s.at(25), 0.001 + 0.099 * 0.5 * (1 + std::sqrt(0.5)), 1e-12);
  EXPECT_NEAR(s.at(100), 0.001, 1e-12);
  EXPECT_NEAR(s.at(250), 0.001, 1e-12);  // stays at the floor past the end
  for (int64_t t = 1; t <= 100; ++t) EXPECT_LE(s.at(t), s.at(t - 1)) << t;  // monotone
}

TEST(LrSchedule, LinearWarmUp) {
  // Half an epoch of 10 steps = 5 warm-up steps: lr (t + 1) / 5, then the schedule's value
  // (Goyal et al. 2017).
  LrSchedule s(Kind::kConstant, 0.5, 10, 100, 0.5);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(1), 0.2);
  EXPECT_DOUBLE_EQ(s.at(2), 0.3);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.at(50), 0.5);
  // Warm-up multiplies whatever the schedule gives: cosine over 100 steps.
  LrSchedule c(Kind::kCosine, 0.5, 10, 100, 0.5);
  EXPECT_DOUBLE_EQ(c.at(0), 0.1);
  EXPECT_NEAR(c.at(4), 0.25 * (1 + std::cos(M_PI * 4 / 100)), 1e-12);
  EXPECT_NE(s.describe().find("warm-up 5 steps"), std::string::npos) << s.describe();
}

TEST(MakeLrSchedule, FromConfig) {
  Config cfg = Config::from_string(
      "[optim]\nlr = 0.2\n[lr]\nschedule = \"step\"\nstep_epochs = 1\ngamma = 0.1\n"
      "warmup_epochs = 1\n");
  const LrSchedule s = make_lr_schedule(plan::read_lr_schedule_options(cfg), 4, 40);
  EXPECT_DOUBLE_EQ(s.at(0), 0.05);  // warm-up 4 steps: 0.2 * 1/4
  EXPECT_DOUBLE_EQ(s.at(3), 0.2);
  EXPECT_NEAR(s.at(4), 0.02, 1e-15);
  EXPECT_NEAR(s.at(8), 0.002, 1e-15);
  // Defaults: constant at optim.lr's default 0.05.
  const LrSchedule d = make_lr_schedule(plan::read_lr_schedule_options(Config{}), 100, 1000);
  EXPECT_DOUBLE_EQ(d.at(0), 0.05);
  EXPECT_DOUBLE_EQ(d.at(999), 0.05);
}

void expect_schedule_refuses(const std::string& toml, const std::string& key) {
  SCOPED_TRACE(toml);
  Config cfg = Config::from_string(toml, "sched.toml");
  try {
    make_lr_schedule(plan::read_lr_schedule_options(cfg), 10, 100);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'" + key + "'"), std::string::npos) << w;
    EXPECT_NE(w.find("sched.toml:"), std::string::npos) << w;
  }
}

TEST(MakeLrSchedule, BadConfigNamesTheKey) {
  expect_schedule_refuses("[lr]\nschedule = \"linear\"\n", "lr.schedule");
  expect_schedule_refuses("[optim]\nlr = 0\n", "optim.lr");
  expect_schedule_refuses("[optim]\nlr = -0.1\n", "optim.lr");
  expect_schedule_refuses("[optim]\nlr = \"fast\"\n", "optim.lr");
  expect_schedule_refuses("[lr]\ngamma = 2.0\n", "lr.gamma");
  expect_schedule_refuses("[lr]\nwarmup_epochs = -1\n", "lr.warmup_epochs");
  expect_schedule_refuses("[lr]\nstep_epochs = 0\n", "lr.step_epochs");
  expect_schedule_refuses("[optim]\nlr = 0.05\n[lr]\nmin = 0.1\n", "lr.min");  // above lr
}

}  // namespace
}  // namespace loom::optim
