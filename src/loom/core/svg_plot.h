// Plots drawn as SVG text, with no dependencies: the returned string is the image.
// * line_chart and bar_chart: the charts of `loom report` (curves per run; horizontal bars,
//   stacked or plain), sized to sit inline in an HTML page; hovering a point or a bar shows its
//   value (SVG <title>).
// * speedup_chart: speedup against GPUs on log2 axes with the ideal diagonal, a standalone file
//   (`loom scale --svg`).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace loom::svg {

// The report's palette (Tableau 10): distinguishable, and kind to common colour blindness.
const std::vector<std::string>& palette();

// "a < b & c" -> "a &lt; b &amp; c".
std::string escape(const std::string& text);

// Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, about
// `target` of them. lo == hi widens the range around the value.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// A tick label: no trailing zeros, thousands as "12k", millions as "3.4M".
std::string tick_label(double v);

// One curve of a line chart or a speedup chart.
struct Series {
  std::string name;
  std::string color;                              // "" = the chart's colour for its position
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool dashed = false;                            // a reference line: dashed, no markers
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;  // a series without a colour takes palette()[i]
  bool y_from_zero = false;    // throughput: bars of context start at zero
  bool integer_x = true;       // epochs, workers
  int width = 560, height = 300;
};
std::string line_chart(const LineChart& chart);

struct BarChart {
  std::string title, unit;                 // unit is shown after values ("ms", "samples/s")
  std::vector<std::string> rows;           // one bar per row (run)
  std::vector<std::string> segment_names;  // one name per stacked segment ({""} = plain bars)
  std::vector<std::string> segment_colors;
  std::vector<std::vector<double>> values;  // [row][segment]
  std::vector<std::string> row_colors;      // plain bars: one colour per row (optional)
  int width = 560;
};
std::string bar_chart(const BarChart& chart);

// Speedup over 1 GPU against GPUs, points (gpus, speedup); both axes log2 from 1 to the
// power of two at or above the most GPUs, so the ideal line is the diagonal; a legend on the
// right. A series without a colour takes the plot's own cycle (matplotlib's first eight).
std::string speedup_chart(const std::string& title, const std::vector<Series>& series);

}  // namespace loom::svg
