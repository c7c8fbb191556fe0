#include "loom/core/svg_plot.h"

#include <gtest/gtest.h>

namespace loom::svg {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgPlot, NiceTicks) {
  const auto unit = nice_ticks(0, 1);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * double(i), 1e-12);
  const auto t = nice_ticks(3, 97);
  EXPECT_EQ(t.front(), 0);
  EXPECT_EQ(t.back(), 100);
  EXPECT_EQ(t[1] - t[0], 20);
  const auto one = nice_ticks(5, 5);  // one value: a range around it
  EXPECT_LT(one.front(), 5);
  EXPECT_GT(one.back(), 5);
  EXPECT_EQ(tick_label(12000), "12k");
  EXPECT_EQ(tick_label(0.25), "0.25");
  EXPECT_EQ(tick_label(3400000), "3.4M");
  EXPECT_EQ(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

TEST(SvgPlot, LineChartPlacesPointsOnTheAxes) {
  LineChart c{"t", "epoch", "loss", {{"run", "#000", {{1, 0.0}, {3, 1.0}}, false}}};
  c.width = 100 + 58 + 14;  // plot area 100 x 100
  c.height = 100 + 30 + 40;
  const std::string s = line_chart(c);
  // x ticks are integers 1..3; y ticks 0..1: the first point sits at the bottom-left corner.
  EXPECT_NE(s.find("points=\"58.0,130.0 158.0,30.0 \""), std::string::npos) << s;
}

TEST(SvgPlot, ASeriesWithoutAColourTakesThePaletteColourOfItsPosition) {
  LineChart c{"t", "x", "y", {{"a", "", {{1, 1}, {2, 2}}}, {"b", "", {{1, 2}, {2, 1}}}}};
  const std::string s = line_chart(c);
  EXPECT_NE(s.find("stroke=\"" + palette()[0] + "\""), std::string::npos);
  EXPECT_NE(s.find("stroke=\"" + palette()[1] + "\""), std::string::npos);
}

TEST(SvgPlot, BarChartDrawsOneBarPerSegmentAndRow) {
  BarChart b;
  b.title = "t";
  b.unit = "ms";
  b.rows = {"one", "two"};
  b.segment_names = {"compute", "comm"};
  b.segment_colors = {"#111111", "#222222"};
  b.values = {{1, 2}, {3, 0}};  // a zero segment draws no bar
  const std::string s = bar_chart(b);
  EXPECT_EQ(count(s, "<rect class=\"bar\""), 3u);
  EXPECT_EQ(count(s, "<svg"), 1u);
}

TEST(SvgPlot, SpeedupChartHasAxesIdealLineAndOneLinePerSeries) {
  const std::string s =
      speedup_chart("t", {{"fp32", "", {{1, 1}, {8, 6}}}, {"onebit", "", {{1, 1}, {8, 7.5}}}});
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_NE(s.find("ideal"), std::string::npos);
  EXPECT_NE(s.find("GPUs (log2)"), std::string::npos);
  EXPECT_EQ(count(s, "<polyline"), 2u);
  EXPECT_EQ(count(s, "<circle"), 4u);
  // Both axes run 1..8 over the 470 x 400 plot area from (80, 50): (1, 1) is its bottom-left.
  EXPECT_NE(s.find("points=\"80.0,450.0 550.0,"), std::string::npos) << s;
}

TEST(SvgPlot, ADashedSpeedupSeriesIsAReferenceWithoutMarkers) {
  const std::string s = speedup_chart("t", {{"model", "#123456", {{1, 1}, {4, 3}}, true}});
  EXPECT_EQ(count(s, "<circle"), 0u);
  EXPECT_NE(s.find("stroke=\"#123456\" stroke-dasharray=\"6 4\""), std::string::npos) << s;
}

}  // namespace
}  // namespace loom::svg
