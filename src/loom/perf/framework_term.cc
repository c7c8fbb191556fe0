#include "loom/perf/framework_term.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

namespace loom::perf {

namespace {

struct Errors {
  std::vector<double> errors;
  std::vector<std::string> publications;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

std::string FrameworkTerm::describe() const {
  if (!valid()) return "no software with enough cases";
  return fmt::format(
      "{} {:+.1f}% ({} cases) to {} {:+.1f}% ({} cases) of the model, spread {:.1f}%", low.software,
      100 * low.offset, low.cases, high.software, 100 * high.offset, high.cases, 100 * spread);
}

FrameworkTerm framework_term(const ValidationRun& run) {
  std::map<std::string, Errors> by;
  for (size_t i = 0; i < run.results.size() && i < run.loo_errors.size(); ++i) {
    const ValidationCase& c = run.results[i].c;
    if (c.figure != "samples_per_s" || c.software == "unstated") continue;
    by[c.software].errors.push_back(run.loo_errors[i]);
    by[c.software].publications.push_back(c.publication);
  }
  FrameworkTerm t;
  std::vector<double> offsets;
  for (const auto& [name, e] : by) {
    SoftwareOffset s;
    s.software = name;
    s.cases = static_cast<int>(e.errors.size());
    s.publications = static_cast<int>(
        std::set<std::string>(e.publications.begin(), e.publications.end()).size());
    s.offset = mean(e.errors);
    s.rms = rms(e.errors);
    t.softwares.push_back(s);
    if (s.cases < kFrameworkMinCases) continue;
    if (offsets.empty() || s.offset < t.low.offset) t.low = s;
    if (offsets.empty() || s.offset > t.high.offset) t.high = s;
    offsets.push_back(s.offset);
  }
  t.spread = rms(offsets);

  // Would an offset have helped? Each case against the mean error of its software's cases from
  // other publications: the offset a user would have had before that publication existed.
  double as_is = 0, with = 0;
  for (const auto& [name, e] : by) {
    for (size_t i = 0; i < e.errors.size(); ++i) {
      std::vector<double> others;
      for (size_t j = 0; j < e.errors.size(); ++j)
        if (e.publications[j] != e.publications[i]) others.push_back(e.errors[j]);
      if (others.empty()) continue;
      ++t.transferable;
      as_is += std::abs(e.errors[i]);
      with += std::abs((1 + e.errors[i]) / (1 + mean(others)) - 1);
    }
  }
  if (t.transferable > 0) {
    t.mean_abs_as_is = as_is / t.transferable;
    t.mean_abs_with_offset = with / t.transferable;
  }
  return t;
}

const FrameworkTerm& builtin_framework_term() {
  static const FrameworkTerm t = framework_term(builtin_validation());
  return t;
}

}  // namespace loom::perf
