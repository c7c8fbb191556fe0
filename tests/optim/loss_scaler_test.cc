// The fp16 dynamic loss scaler, driven by injected overflows: skipped steps halve the scale,
// each run of growth_interval clean steps doubles it, both within [min, max]; unscale()
// divides finite gradients and leaves overflowed ones alone.
#include "loom/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "loom/core/error.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace loom::optim {
namespace {

TEST(LossScaler, StartsAt2To16WithPyTorchsDefaults) {
  LossScaler s;
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 16));
  // The 2000th clean step doubles, not the 1999th.
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 16));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 17));
  EXPECT_EQ(s.clean_streak(), 0);
}

TEST(LossScaler, OverflowSkipsTheStepHalvesAndRestartsTheCount) {
  LossScaler s({.initial = 1024.0f, .growth_interval = 3, .min_scale = 1.0f, .max_scale = 1e6f});
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_FALSE(s.update(true));  // the third step overflows: no growth, halved
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.clean_streak(), 0);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512.0f);  // two clean steps since the overflow
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(LossScaler, ScheduleOfInjectedOverflowsFollowsTheRule) {
  // 100 steps, overflows injected at a few of them; the expected scale is replayed here from
  // the rule in plain arithmetic (powers of two, so exact in float and double).
  const std::set<int> overflow = {4, 5, 6, 30, 31, 77};
  const int64_t interval = 7;
  LossScaler s(
      {.initial = 256.0f, .growth_interval = interval, .min_scale = 32.0f, .max_scale = 4096.0f});
  double want = 256.0;
  int64_t streak = 0, skipped = 0;
  for (int step = 0; step < 100; ++step) {
    const bool bad = overflow.count(step) > 0;
    EXPECT_EQ(s.update(bad), !bad) << "step " << step;
    if (bad) {
      want = std::max(32.0, want / 2), streak = 0, ++skipped;
    } else if (++streak == interval) {
      want = std::min(4096.0, want * 2), streak = 0;
    }
    ASSERT_EQ(double(s.scale()), want) << "step " << step;
  }
  EXPECT_EQ(s.skipped_steps(), skipped);
  EXPECT_EQ(s.scale(), 4096.0f);  // enough clean steps at the end to reach the cap
}

TEST(LossScaler, BoundedByMinAndMax) {
  LossScaler s({.initial = 8.0f, .growth_interval = 1, .min_scale = 2.0f, .max_scale = 32.0f});
  for (int i = 0; i < 10; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 2.0f);
  for (int i = 0; i < 10; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32.0f);
}

TEST(LossScaler, UnscaleDividesFiniteGradientsAndSkipsOverflowedOnes) {
  Backend& be = cpu_backend();
  LossScaler s({.initial = 64.0f, .growth_interval = 2, .min_scale = 1.0f, .max_scale = 1e9f});
  std::vector<float> g = {64.0f, -128.0f, 3.0f, 0.0f};
  EXPECT_TRUE(s.unscale(be, g.data(), int64_t(g.size())));
  EXPECT_EQ(g, (std::vector<float>{1.0f, -2.0f, 3.0f / 64.0f, 0.0f}));
  EXPECT_EQ(s.scale(), 64.0f);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> h = {1.0f, bad, 2.0f};
    const float before = s.scale();
    EXPECT_FALSE(s.unscale(be, h.data(), 3));
    EXPECT_EQ(h[0], 1.0f);  // untouched: the step is skipped
    EXPECT_EQ(h[2], 2.0f);
    EXPECT_EQ(s.scale(), before / 2);
  }
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, BadOptionsAreConfigErrors) {
  EXPECT_THROW(LossScaler({.initial = 0.0f}), ConfigError);
  EXPECT_THROW(LossScaler({.initial = std::numeric_limits<float>::infinity()}), ConfigError);
  EXPECT_THROW(LossScaler({.initial = 4.0f, .growth_interval = 10, .min_scale = 8.0f}),
               ConfigError);
  EXPECT_THROW(LossScaler({.initial = 65536.0f, .growth_interval = 0}), ConfigError);
  EXPECT_THROW(
      LossScaler({.initial = 8.0f, .growth_interval = 1, .min_scale = 16.0f, .max_scale = 4.0f}),
      ConfigError);
}

TEST(LossScaler, RestorePutsBackAStateInRangeOnly) {
  LossScalerOptions o;
  o.growth_interval = 4;
  LossScaler s(o);
  EXPECT_TRUE(s.restore(1024.0f, 3, 7));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.clean_streak(), 3);
  EXPECT_EQ(s.skipped_steps(), 7);
  EXPECT_TRUE(s.update(false));  // the 4th clean step in a row doubles
  EXPECT_EQ(s.scale(), 2048.0f);
  for (auto [scale, streak, skipped] :
       {std::tuple{0.5f, int64_t(0), int64_t(0)}, std::tuple{1e9f, int64_t(0), int64_t(0)},
        std::tuple{8.0f, int64_t(4), int64_t(0)}, std::tuple{8.0f, int64_t(-1), int64_t(0)},
        std::tuple{8.0f, int64_t(0), int64_t(-2)}}) {
    EXPECT_FALSE(s.restore(scale, streak, skipped)) << scale << " " << streak << " " << skipped;
    EXPECT_EQ(s.scale(), 2048.0f);  // unchanged
  }
}

TEST(LossScaler, ConfigTurnsItOnWithFp16OrWhenAskedFor) {
  Config cfg;
  EXPECT_FALSE(plan::read_loss_scaler_options(cfg).has_value());  // fp32 by default
  cfg.set("precision", std::string("bf16"));
  EXPECT_FALSE(plan::read_loss_scaler_options(cfg).has_value());  // bf16 has fp32's range
  cfg.set("precision", std::string("fp16"));
  const auto on = plan::read_loss_scaler_options(cfg);
  ASSERT_TRUE(on.has_value());
  EXPECT_EQ(on->initial, 65536.0f);
  EXPECT_EQ(on->growth_interval, 2000);
  cfg.set("loss_scale.mode", std::string("none"));
  EXPECT_FALSE(plan::read_loss_scaler_options(cfg).has_value());
  Config fp32;
  fp32.set("loss_scale.mode", std::string("dynamic"));
  fp32.set("loss_scale.initial", 256.0);
  fp32.set("loss_scale.growth_interval", int64_t(10));
  const auto asked = plan::read_loss_scaler_options(fp32);
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->initial, 256.0f);
  EXPECT_EQ(asked->growth_interval, 10);
  fp32.set("loss_scale.min", 512.0);  // above initial
  EXPECT_THROW(plan::read_loss_scaler_options(fp32), ConfigError);
}

}  // namespace
}  // namespace loom::optim
