// 1-bit Adam's two stages on flat spans: AdamW bit for bit until the freeze, then the frozen
// variance, the update from the momentum against a double-precision reference, and the
// exchange's algebra (what N workers send sums to the momentum one worker would compute).
#include "loom/optim/onebit_adam.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::optim {
namespace {

constexpr float kBeta1 = 0.9f, kBeta2 = 0.99f, kEps = 1e-8f, kWd = 0.01f, kLr = 0.01f;

std::vector<float> buffer(Optimizer& opt, size_t which) {
  const auto s = opt.state();
  return std::vector<float>(s.at(which).data, s.at(which).data + s.at(which).size);
}

// A gradient that changes with the step, with both signs and several magnitudes.
std::vector<float> grad_at(int step, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = std::sin(0.7f * float(i) + 1.3f * float(step)) * (1.0f + float(i % 3));
  return g;
}

TEST(OnebitAdam, UntilTheFreezeItIsAdamWBitForBit) {
  const size_t n = 7;
  OnebitAdam one(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, kWd);
  Adam adamw(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, kWd, true);
  one.set_freeze_step(4);
  std::vector<float> p1(n, 0.5f), p2(n, 0.5f);
  for (int step = 1; step <= 4; ++step) {
    const std::vector<float> g = grad_at(step, n);
    one.step(p1.data(), g.data(), int64_t(n), kLr);
    adamw.step(p2.data(), g.data(), int64_t(n), kLr);
    EXPECT_FALSE(one.frozen());
  }
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(buffer(one, 0), buffer(adamw, 0));
  EXPECT_EQ(buffer(one, 1), buffer(adamw, 1));
}

TEST(OnebitAdam, AfterTheFreezeTheVarianceStaysAndTheMomentumMoves) {
  const size_t n = 5;
  OnebitAdam one(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, kWd);
  one.set_freeze_step(3);
  std::vector<float> p(n, 1.0f);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = grad_at(step, n);
    one.step(p.data(), g.data(), int64_t(n), kLr);
  }
  const std::vector<float> v = buffer(one, 1);
  const std::vector<float> m0 = buffer(one, 0);
  std::vector<double> m(m0.begin(), m0.end());
  std::vector<double> want(p.begin(), p.end());
  for (int step = 4; step <= 6; ++step) {
    const std::vector<float> g = grad_at(step, n);
    one.step(p.data(), g.data(), int64_t(n), kLr);
    EXPECT_TRUE(one.frozen());
    // The reference in double: m <- b1 m + (1 - b1) g; p <- p (1 - lr wd) - lr m_hat /
    // (sqrt(v_hat) + eps), v_hat with the correction of the freeze step.
    const double c1 = 1.0 / (1.0 - std::pow(double(kBeta1), step));
    const double c2 = 1.0 / (1.0 - std::pow(double(kBeta2), 3));
    for (size_t i = 0; i < n; ++i) {
      m[i] = kBeta1 * m[i] + (1.0 - kBeta1) * g[i];
      const double bound = OnebitAdam::adam_step_bound(kBeta1, kBeta2);
      const double step = (m[i] * c1) / (std::sqrt(double(v[i]) * c2) + kEps);
      want[i] = want[i] * (1.0 - double(kLr) * kWd) - kLr * std::clamp(step, -bound, bound);
    }
  }
  EXPECT_EQ(buffer(one, 1), v);  // frozen
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(p[i], want[i], 1e-6) << i;
    EXPECT_NEAR(buffer(one, 0)[i], m[i], 1e-6) << i;
  }
}

// What three workers send for their shares of a gradient sums to the momentum one worker
// computes from the whole gradient, so the exchanged sum is the run's momentum.
TEST(OnebitAdam, TheWorkersSharesSumToTheMomentum) {
  const size_t n = 6;
  const int world = 3;
  OnebitAdam one(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, 0.0f);
  OnebitAdam three(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, 0.0f);
  one.set_freeze_step(1);
  three.set_freeze_step(1);
  std::vector<float> p1(n, 0.25f), p3(n, 0.25f);
  const std::vector<float> g1 = grad_at(1, n);
  one.step(p1.data(), g1.data(), int64_t(n), kLr);
  three.step(p3.data(), g1.data(), int64_t(n), kLr);
  // Step 2, frozen: the whole gradient g, or three shares of it exchanged.
  const std::vector<float> g = grad_at(2, n);
  one.step(p1.data(), g.data(), int64_t(n), kLr);
  three.advance();
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < world; ++r) {
    std::vector<float> share(n);
    for (size_t i = 0; i < n; ++i) share[i] = g[i] / float(world);
    three.momentum_to_send(share.data(), 0, int64_t(n), world);
    for (size_t i = 0; i < n; ++i) sum[i] += share[i];
  }
  three.apply_momentum(p3.data(), sum.data(), 0, int64_t(n), kLr);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(buffer(three, 0)[i], buffer(one, 0)[i], 1e-6) << i;
    EXPECT_NEAR(p3[i], p1[i], 1e-6) << i;
  }
}

// The bound is what Adam itself reaches: on the gradients that make Cauchy-Schwarz an equality
// (each step's gradient beta2 / beta1 times the last) Adam's bias-corrected m / sqrt(v) climbs
// to it and never past it. Without a bound (beta1^2 >= beta2) it is infinite.
TEST(OnebitAdam, ItsStepBoundIsTheMostAdamTakes) {
  for (const auto& [b1, b2] : {std::pair{0.9f, 0.999f}, std::pair{0.9f, 0.99f}}) {
    const double bound = OnebitAdam::adam_step_bound(b1, b2);
    double m = 0, v = 0, most = 0;
    for (int t = 1; t <= 20000; ++t) {
      // Rescaled by the last gradient, so the newest is 1 and nothing overflows.
      m *= double(b1) / double(b2);
      v *= double(b1) * double(b1) / (double(b2) * double(b2));
      m = double(b1) * m + (1 - double(b1));
      v = double(b2) * v + (1 - double(b2));
      const double ratio =
          (m / (1 - std::pow(double(b1), t))) / std::sqrt(v / (1 - std::pow(double(b2), t)));
      most = std::max(most, ratio);
    }
    EXPECT_LE(most, bound * (1 + 1e-6)) << b1 << " " << b2;
    EXPECT_GT(most, bound * 0.99) << b1 << " " << b2;
  }
  EXPECT_NEAR(OnebitAdam::adam_step_bound(0.9f, 0.999f), 7.27, 0.01);
  EXPECT_EQ(OnebitAdam::adam_step_bound(0.9f, 0.8f), std::numeric_limits<float>::infinity());
}

// An element whose gradient was zero through the warm-up has no variance; 1-bit hands it its
// column's level as momentum. Its step stays within Adam's bound (unclamped it would be
// lr * level / eps), and the other elements take the unclamped rule.
TEST(OnebitAdam, AFrozenStepStaysWithinAdamsBound) {
  const size_t n = 3;
  OnebitAdam one(cpu_backend(), int64_t(n), kBeta1, kBeta2, kEps, 0.0f);
  one.set_freeze_step(2);
  std::vector<float> p(n, 1.0f);
  for (int step = 1; step <= 2; ++step) {
    std::vector<float> g = grad_at(step, n);
    g[0] = 0.0f;  // a unit that never fired
    one.step(p.data(), g.data(), int64_t(n), kLr);
  }
  ASSERT_EQ(p[0], 1.0f);
  ASSERT_EQ(buffer(one, 1)[0], 0.0f);
  const std::vector<float> before = p, v = buffer(one, 1), m0 = buffer(one, 0);
  one.advance();
  const std::vector<float> level(n, 0.05f);  // the codec's level for every element
  one.apply_momentum(p.data(), level.data(), 0, int64_t(n), kLr);
  const float bound = OnebitAdam::adam_step_bound(kBeta1, kBeta2);
  EXPECT_NEAR(before[0] - p[0], kLr * bound, 1e-7);  // unclamped: lr * 0.05 * c1 / eps, ~1e5
  const double c1 = 1.0 / (1.0 - std::pow(double(kBeta1), 3));
  const double c2 = 1.0 / (1.0 - std::pow(double(kBeta2), 2));
  for (size_t i = 1; i < n; ++i) {
    const double step = (0.05 * c1) / (std::sqrt(double(v[i]) * c2) + kEps);
    ASSERT_LT(std::abs(step), bound) << i;
    EXPECT_NEAR(before[i] - p[i], kLr * step, 1e-6) << i;
  }
}

TEST(OnebitAdam, ItsStateHasNamesOfItsOwnAndNeedsAWarmUp) {
  OnebitAdam one(cpu_backend(), 3, kBeta1, kBeta2, kEps, kWd);
  const auto s = one.state();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "onebit_adam_m");  // an Adam checkpoint's "adam_m" does not restore here
  EXPECT_EQ(s[1].name, "onebit_adam_v");
  EXPECT_THROW(one.set_freeze_step(0), Error);
  std::vector<float> p(3, 0.0f), g(3, 1.0f);
  one.advance();
  EXPECT_THROW(one.update(p.data(), g.data(), 0, 3, kLr), Error);  // no freeze step set
}

TEST(OnebitAdam, TheConfigNamesItAndItDecaysWeightsDecoupled) {
  const OptimizerOptions o = plan::read_optimizer_options(
      Config::from_string("[optim]\nname = \"onebit_adam\"\nbeta2 = 0.99\n", "o.toml"));
  EXPECT_EQ(o.name, "onebit_adam");
  EXPECT_TRUE(o.decoupled);
  EXPECT_FLOAT_EQ(o.beta2, 0.99f);
  EXPECT_NE(dynamic_cast<OnebitAdam*>(make_optimizer(o, cpu_backend(), 4).get()), nullptr);
  try {
    plan::read_optimizer_options(
        Config::from_string("[optim]\nname = \"onebit_adam\"\ndecoupled = false\n", "o.toml"));
    FAIL() << "onebit_adam with coupled weight decay was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("o.toml:3: key 'optim.decoupled'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(plan::read_optimizer_options(Config::from_string(
                   "[optim]\nname = \"onebit_adam\"\nmomentum = 0.5\n", "o.toml")),
               ConfigError);  // an SGD key
}

}  // namespace
}  // namespace loom::optim
