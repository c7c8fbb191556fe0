// Plots for `loom report`, drawn as inline SVG text: line charts (curves per run) and
// horizontal bar charts (stacked or plain). No scripts, no fonts to fetch: the page opens
// offline. Hovering a point or bar shows its value (SVG <title>).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace loom::train::svg {

// The report's palette (Tableau 10): distinguishable, and kind to common colour blindness.
const std::vector<std::string>& palette();

// "a < b & c" -> "a &lt; b &amp; c".
std::string escape(const std::string& text);

// Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, about
// `target` of them. lo == hi widens the range around the value.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// A tick label: no trailing zeros, thousands as "12k", millions as "3.4M".
std::string tick_label(double v);

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool dashed = false;                            // e.g. an ideal-scaling reference
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool y_from_zero = false;  // throughput: bars of context start at zero
  bool integer_x = true;     // epochs, workers
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

}  // namespace loom::train::svg
