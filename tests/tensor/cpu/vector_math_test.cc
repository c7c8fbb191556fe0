// The vectorisable exp and normal CDF of the CPU backend's activations against double-precision
// libm, on dense grids: the accuracy vector_math.h states.
#include "loom/tensor/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loom::cpu {
namespace {

TEST(VectorMath, ExpIsWithinTwoTenthsOfAMillionthRelative) {
  double worst = 0;
  float at = 0;
  for (double xd = -87.0; xd <= 88.0; xd += 1e-3) {
    const float x = float(xd);
    const double want = std::exp(double(x));
    const double err = std::fabs(double(exp_approx(x)) - want) / want;
    if (err > worst) worst = err, at = x;
  }
  EXPECT_LE(worst, 2e-7) << "at x = " << at;
  // Clamped outside [-87, 88]: finite and positive, never inf or a denormal's garbage.
  EXPECT_EQ(exp_approx(-1000.0f), exp_approx(-87.0f));
  EXPECT_EQ(exp_approx(1000.0f), exp_approx(88.0f));
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

TEST(VectorMath, NormalCdfKeepsItsLowerTail) {
  double worst_rel = 0, worst_abs = 0;
  for (double xd = -15.0; xd <= 15.0; xd += 1e-4) {
    const float x = float(xd);
    const double want = 0.5 * std::erfc(-double(x) / std::sqrt(2.0));
    const double got = normal_cdf(x);
    if (want > 1e-5) worst_rel = std::max(worst_rel, std::fabs(got - want) / want);
    if (x >= 0) worst_abs = std::max(worst_abs, std::fabs(got - want));
  }
  EXPECT_LE(worst_rel, 2e-6);
  EXPECT_LE(worst_abs, 3e-7);
  EXPECT_LT(normal_cdf(-100.0f), 1e-37f);  // e^-87 at the clamp, times the fit
  EXPECT_EQ(normal_cdf(100.0f), 1.0f);
  EXPECT_NEAR(normal_cdf(0.0f), 0.5f, 1e-7);
}

// Every element counts once, whole groups of lanes and the tail alike: values whose double sums
// are exact (multiples of 1/4 far below 2^52) give the exact total at every length, so a lane
// or tail element dropped or counted twice shows.
TEST(VectorMath, LaneSumCountsEveryElementOnce) {
  for (int64_t n = 0; n <= 3 * kSumLanes + 3; ++n) {
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += 0.25 * double(i + 1) * double(i % 3 == 0 ? -1 : 1);
    const double got =
        lane_sum(n, [](int64_t i) { return 0.25 * double(i + 1) * double(i % 3 == 0 ? -1 : 1); });
    EXPECT_EQ(got, want) << "n = " << n;
  }
}

}  // namespace
}  // namespace loom::cpu
