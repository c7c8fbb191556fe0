#include "loom/perf/anchors.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loom::perf {
namespace {

TEST(Anchors, EveryPublishedAnchorIsWithinFifteenPercent) {
  int checked = 0;
  for (const auto& a : run_anchors()) {
    if (!a.checked) continue;
    ++checked;
    EXPECT_LE(std::abs(a.error()), 0.15)
        << a.name << ": published " << a.target << ", predicted " << a.predicted;
  }
  EXPECT_GE(checked, 8);
}

TEST(Anchors, OneBitWithBlockMomentumBeatsFp32EveryStep) {
  double fp32 = 0, bmuf = 0;
  for (const auto& a : run_anchors()) {
    if (a.name.find("fp32 every step") != std::string::npos) fp32 = a.predicted;
    if (a.name.find("block momentum") != std::string::npos) bmuf = a.predicted;
  }
  EXPECT_GT(bmuf, 85);
  EXPECT_LT(fp32, 0.5 * bmuf);
}

}  // namespace
}  // namespace loom::perf
