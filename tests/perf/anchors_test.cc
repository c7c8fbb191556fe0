#include "loom/perf/anchors.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/perf/svg_plot.h"

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

TEST(SvgPlot, HasAxesIdealLineAndOneLinePerSeries) {
  std::string svg = speedup_svg("t", {{"fp32", {{1, 1}, {8, 6}}}, {"onebit", {{1, 1}, {8, 7.5}}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("ideal"), std::string::npos);
  EXPECT_NE(svg.find("GPUs (log2)"), std::string::npos);
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u);
}

}  // namespace
}  // namespace loom::perf
