#include "loom/perf/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace loom::perf {
namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string speedup_svg(const std::string& title, const std::vector<PlotSeries>& series) {
  const double W = 760, H = 520, left = 80, right = 210, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  double xmax = 1;
  for (const auto& s : series)
    for (auto [x, y] : s.xy) xmax = std::max(xmax, x);
  // Both axes log2 from 1 to the next power of two: the ideal line is the diagonal.
  const double lmax = std::max(1.0, std::ceil(std::log2(xmax)));
  auto X = [&](double x) { return left + pw * std::log2(std::max(x, 1.0)) / lmax; };
  auto Y = [&](double y) {
    return top + ph - ph * std::log2(std::clamp(y, 1.0, std::exp2(lmax))) / lmax;
  };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H);
  o += fmt::format(
      "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\" "
      "font-weight=\"bold\">{}</text>\n",
      left + pw / 2, escape(title));
  // Grid and ticks at every power of two.
  for (int i = 0; i <= static_cast<int>(lmax); ++i) {
    double v = std::exp2(i);
    o += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n", X(v),
        top, top + ph);
    o += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e0e0e0\"/>\n", left,
        Y(v), left + pw);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", X(v),
                     top + ph + 20, static_cast<long>(v));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8,
                     Y(v) + 4, static_cast<long>(v));
  }
  o += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", left,
      top, pw, ph);
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPUs (log2)</text>\n",
                   left + pw / 2, H - 22);
  o += fmt::format(
      "<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">speedup "
      "over 1 GPU (log2)</text>\n",
      top + ph / 2);
  // Ideal line.
  o += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"6 4\" "
      "stroke-width=\"1.5\"/>\n",
      X(1), Y(1), X(std::exp2(lmax)), Y(std::exp2(lmax)));
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  double ly = top + 10;
  o += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"6 4\" "
      "stroke-width=\"1.5\"/>\n",
      left + pw + 15, ly, left + pw + 45, ly);
  o += fmt::format("<text x=\"{}\" y=\"{}\">ideal</text>\n", left + pw + 52, ly + 4);
  for (size_t i = 0; i < series.size(); ++i) {
    const char* c = colors[i % 8];
    std::string pts;
    for (auto [x, y] : series[i].xy) pts += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
    o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.2\"/>\n",
                     pts, c);
    for (auto [x, y] : series[i].xy)
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", X(x), Y(y),
                       c);
    ly += 22;
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.2\"/>\n",
        left + pw + 15, ly, left + pw + 45, ly, c);
    o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + pw + 52, ly + 4,
                     escape(series[i].label));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace loom::perf
