// A small self-made SVG line plot: speedup against GPUs on log2 axes, the ideal line, one
// series per codec, ticks, grid and a legend. No dependencies; the text is the file.
#pragma once

#include <string>
#include <vector>

namespace loom::perf {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> xy;  // (gpus, speedup)
};

std::string speedup_svg(const std::string& title, const std::vector<PlotSeries>& series);

}  // namespace loom::perf
