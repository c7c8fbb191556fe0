#include "loom/core/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::svg {
namespace {

constexpr const char* kGrid = "#e6e8ec";
constexpr const char* kAxisText = "#6b7280";
constexpr const char* kTitle = "#1f2937";

std::string num(double v) {
  return fmt::format("{:.1f}", v);
}

std::string shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "\u2026";
}

std::string header(int w, int h, const std::string& title) {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" )"
      R"(width="{w}" height="{h}" role="img" aria-label="{t}" font-family="system-ui, )"
      R"(-apple-system, 'Segoe UI', Roboto, sans-serif">)"
      R"(<text x="0" y="16" font-size="14" font-weight="600" fill="{c}">{t}</text>)",
      fmt::arg("w", w), fmt::arg("h", h), fmt::arg("t", escape(title)), fmt::arg("c", kTitle));
}

// The series' own colour, else the cycle's colour for position i.
const std::string& color_or(const Series& s, const std::vector<std::string>& cycle, size_t i) {
  return s.color.empty() ? cycle[i % cycle.size()] : s.color;
}

}  // namespace

const std::vector<std::string>& palette() {
  static const std::vector<std::string> p = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return p;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (!(hi > lo)) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  const double start = std::floor(lo / step + 1e-9), end = std::ceil(hi / step - 1e-9);
  std::vector<double> out;
  for (double k = start; k <= end; k += 1) {
    double v = k * step;
    if (std::fabs(v) < step * 1e-9) v = 0;
    out.push_back(v);
  }
  return out;
}

std::string tick_label(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.6g}", v);
}

std::string line_chart(const LineChart& c) {
  const double left = 58, right = 14, top = 30, bottom = 40;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      xlo = std::min(xlo, x), xhi = std::max(xhi, x);
      ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  std::string out = header(c.width, c.height, c.title);
  if (!std::isfinite(xlo)) {
    out += fmt::format(R"(<text x="{}" y="{}" font-size="13" fill="{}" text-anchor="middle">)"
                       "no data</text></svg>",
                       c.width / 2, c.height / 2, kAxisText);
    return out;
  }
  if (c.y_from_zero) ylo = std::min(0.0, ylo);
  if (c.integer_x && xhi - xlo < 1) xlo -= 1, xhi += 1;
  std::vector<double> xt = nice_ticks(xlo, xhi, 6), yt = nice_ticks(ylo, yhi, 5);
  if (c.integer_x) {
    // Integer steps only: an epoch 1.5 does not exist.
    const double step = std::max(1.0, xt.size() > 1 ? std::round(xt[1] - xt[0]) : 1.0);
    xt.clear();
    for (double v = std::floor(xlo); v <= std::ceil(xhi) + 1e-9; v += step) xt.push_back(v);
  }
  const double x0 = xt.front(), x1 = xt.back(), y0 = yt.front(), y1 = yt.back();
  auto X = [&](double x) { return left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * pw; };
  auto Y = [&](double y) { return top + ph - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * ph; };

  for (double v : yt) {
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}"/>)", num(left),
                       num(left + pw), num(Y(v)), num(Y(v)), kGrid);
    out +=
        fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="{}" text-anchor="end">{}</text>)",
                    num(left - 6), num(Y(v) + 4), kAxisText, tick_label(v));
  }
  for (double v : xt)
    out += fmt::format(
        R"(<text x="{}" y="{}" font-size="11" fill="{}" text-anchor="middle">{}</text>)", num(X(v)),
        num(top + ph + 16), kAxisText, tick_label(v));
  out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#9ca3af"/>)", num(left),
                     num(left + pw), num(top + ph), num(top + ph));
  out +=
      fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="{}" text-anchor="middle">{}</text>)",
                  num(left + pw / 2), num(c.height - 6), kAxisText, escape(c.x_label));
  out += fmt::format(R"x(<text transform="translate(12 {}) rotate(-90)" font-size="11" fill="{}" )x"
                     R"x(text-anchor="middle">{}</text>)x",
                     num(top + ph / 2), kAxisText, escape(c.y_label));

  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    if (s.points.empty()) continue;
    const std::string& color = color_or(s, palette(), i);
    std::string pts;
    for (const auto& [x, y] : s.points) pts += fmt::format("{},{} ", num(X(x)), num(Y(y)));
    out += fmt::format(
        R"(<polyline class="series" points="{}" fill="none" stroke="{}" stroke-width="2.2" )"
        R"(stroke-linejoin="round" stroke-linecap="round"{}><title>{}</title></polyline>)",
        pts, color, s.dashed ? R"( stroke-dasharray="5 4" opacity="0.7")" : "", escape(s.name));
    if (s.dashed) continue;
    for (const auto& [x, y] : s.points)
      out += fmt::format(
          R"(<circle cx="{}" cy="{}" r="3.6" fill="{}" stroke="#fff" stroke-width="1.4">)"
          R"(<title>{}: {} = {}, {} = {}</title></circle>)",
          num(X(x)), num(Y(y)), color, escape(s.name), escape(c.x_label), tick_label(x),
          escape(c.y_label), fmt::format("{:.5g}", y));
  }
  out += "</svg>";
  return out;
}

std::string bar_chart(const BarChart& c) {
  const size_t nseg = c.segment_names.size();
  const bool stacked = nseg > 1;
  // Room on the right for the value label of the longest bar ("9450 samples/s").
  const double label_w = 170, right = 44 + 6.6 * double(c.unit.size()), row_h = 28, bar_h = 18;
  const double top = stacked ? 50 : 30, bottom = 26;
  const double pw = c.width - label_w - right;
  const int height = int(top + row_h * double(c.rows.size()) + bottom);
  std::string out = header(c.width, height, c.title);
  double vmax = 0;
  for (const auto& row : c.values) {
    double t = 0;
    for (double v : row) t += std::max(0.0, v);
    vmax = std::max(vmax, t);
  }
  const std::vector<double> xt = nice_ticks(0, vmax > 0 ? vmax : 1, 5);
  const double xmax = xt.back();
  auto X = [&](double v) { return label_w + v / xmax * pw; };

  if (stacked) {  // legend of the segments
    double lx = 0;
    for (size_t s = 0; s < nseg; ++s) {
      out += fmt::format(R"(<rect x="{}" y="26" width="11" height="11" rx="2" fill="{}"/>)",
                         num(lx), c.segment_colors[s]);
      out += fmt::format(R"(<text x="{}" y="35.5" font-size="11.5" fill="#374151">{}</text>)",
                         num(lx + 15), escape(c.segment_names[s]));
      lx += 15 + 7.0 * double(c.segment_names[s].size()) + 18;
    }
  }
  const double plot_bottom = top + row_h * double(c.rows.size());
  for (double v : xt) {
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}"/>)", num(X(v)),
                       num(X(v)), num(top - 4), num(plot_bottom), kGrid);
    out += fmt::format(
        R"(<text x="{}" y="{}" font-size="11" fill="{}" text-anchor="middle">{}</text>)", num(X(v)),
        num(plot_bottom + 15), kAxisText, tick_label(v));
  }
  for (size_t r = 0; r < c.rows.size(); ++r) {
    const double y = top + row_h * double(r) + (row_h - bar_h) / 2;
    out += fmt::format(
        R"(<text x="{}" y="{}" font-size="12" fill="#374151" text-anchor="end">{}<title>{})"
        R"(</title></text>)",
        num(label_w - 8), num(y + bar_h / 2 + 4), escape(shorten(c.rows[r], 24)),
        escape(c.rows[r]));
    double at = 0, total = 0;
    for (size_t s = 0; s < nseg && s < c.values[r].size(); ++s) {
      const double v = std::max(0.0, c.values[r][s]);
      total += v;
      if (v <= 0) continue;
      const std::string color =
          !stacked && r < c.row_colors.size() ? c.row_colors[r] : c.segment_colors[s];
      out +=
          fmt::format(R"(<rect class="bar" x="{}" y="{}" width="{}" height="{}" rx="2" fill="{}">)"
                      R"(<title>{}{}{}: {:.4g} {}</title></rect>)",
                      num(X(at)), num(y), num(std::max(0.5, X(at + v) - X(at))), num(bar_h), color,
                      escape(c.rows[r]), stacked ? ", " : "",
                      escape(stacked ? c.segment_names[s] : ""), v, escape(c.unit));
      at += v;
    }
    out += fmt::format(
        R"(<text x="{}" y="{}" font-size="11" fill="#374151">{}</text>)", num(X(total) + 5),
        num(y + bar_h / 2 + 4),
        escape(fmt::format("{} {}", tick_label(std::stod(fmt::format("{:.4g}", total))), c.unit)));
  }
  out += "</svg>";
  return out;
}

std::string speedup_chart(const std::string& title, const std::vector<Series>& series) {
  const double W = 760, H = 520, left = 80, right = 210, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  double xmax = 1;
  for (const auto& s : series)
    for (auto [x, y] : s.points) xmax = std::max(xmax, x);
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
  constexpr const char* kDash = "stroke-dasharray=\"6 4\" ";
  o += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" {}stroke-width=\"1.5\"/>\n",
      X(1), Y(1), X(std::exp2(lmax)), Y(std::exp2(lmax)), kDash);
  static const std::vector<std::string> cycle = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  double ly = top + 10;
  o += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" {}stroke-width=\"1.5\"/>\n",
      left + pw + 15, ly, left + pw + 45, ly, kDash);
  o += fmt::format("<text x=\"{}\" y=\"{}\">ideal</text>\n", left + pw + 52, ly + 4);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string& c = color_or(s, cycle, i);
    const char* dash = s.dashed ? kDash : "";
    std::string pts;
    for (auto [x, y] : s.points) pts += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
    o += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" {}stroke-width=\"2.2\"/>\n", pts, c,
        dash);
    if (!s.dashed)
      for (auto [x, y] : s.points)
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", X(x),
                         Y(y), c);
    ly += 22;
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" {}stroke-width=\"2.2\"/>\n",
        left + pw + 15, ly, left + pw + 45, ly, c, dash);
    o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + pw + 52, ly + 4, escape(s.name));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace loom::svg
