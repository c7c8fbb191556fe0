#include "loom/perf/codec_fidelity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/core/error.h"
#include "loom/perf/toml_rows.h"

namespace loom::perf {

extern const char* const kBuiltinCodecFidelityToml;

namespace {
constexpr const char* kBuiltinFidelityName = "data/perf/codec_fidelity.toml";

double budget_of(AccuracyMetric m, double points, double bits) {
  return m == AccuracyMetric::kPoints ? points : bits;
}
}  // namespace

const char* metric_unit(AccuracyMetric m) {
  return m == AccuracyMetric::kPoints ? "points" : "bits";
}

const char* risk_name(FidelityRisk r) {
  switch (r) {
    case FidelityRisk::kWithin:
      return "within";
    case FidelityRisk::kOver:
      return "over";
    case FidelityRisk::kUnknown:
      break;
  }
  return "unknown";
}

FidelityCalibration parse_fidelity_calibration(const std::string& text, const std::string& name) {
  const toml::table root = parse_toml_table(text, name);
  const toml::node* v = root.get("format_version");
  if (!v || !v->is_integer())
    throw InputError(fmt::format("{}: 'format_version' must be a whole number", name));
  const int64_t version = **v->as_integer();
  if (version > kFidelityCalibrationFormatVersion)
    throw InputError(
        fmt::format("{}: fidelity calibration format version {} is newer than this "
                    "loom reads ({})",
                    name, version, kFidelityCalibrationFormatVersion));
  FidelityCalibration cal;
  cal.file = name;
  for_rows(root, name, "case", [&](const RowReader& row) {
    row.check_known({"network", "optimizer", "codec", "workers", "metric", "drift", "update_cosine",
                     "steps", "loss", "seeds", "source"});
    FidelityCase c;
    c.network = row.str("network");
    c.optimizer = row.str("optimizer");
    c.codec = row.str("codec");
    c.workers = row.count("workers", 2);
    const std::string metric = row.str("metric");
    if (metric != "points" && metric != "bits")
      row.fail("metric", fmt::format("must be \"points\" or \"bits\", got '{}'", metric));
    c.metric = metric == "points" ? AccuracyMetric::kPoints : AccuracyMetric::kBits;
    c.drift = row.num("drift", true, true);
    c.update_cosine = row.signed_num("update_cosine");
    if (std::abs(c.update_cosine) > 1) row.fail("update_cosine", "must be in [-1, 1]");
    c.steps = row.count("steps", 0);
    if (c.steps < 1) row.fail("steps", "must be at least 1");
    c.loss = row.signed_num("loss");
    c.seeds = row.count("seeds", 1);
    c.source = row.str("source");
    cal.cases.push_back(c);
  });
  if (cal.cases.empty()) throw InputError(fmt::format("{}: no [[case]] rows", name));
  return cal;
}

FidelityCalibration builtin_fidelity_calibration() {
  return parse_fidelity_calibration(kBuiltinCodecFidelityToml, kBuiltinFidelityName);
}

FidelityVerdict assess_fidelity(const CodecFidelity& f, const FidelityCalibration& cal,
                                double budget_points, double budget_bits) {
  FidelityVerdict v;
  v.over_drift = std::numeric_limits<double>::infinity();
  for (const FidelityCase& c : cal.cases) {
    if (c.loss > budget_of(c.metric, budget_points, budget_bits)) {
      ++v.cases_over;
      v.over_drift = std::min(v.over_drift, c.drift);
    } else {
      ++v.cases_within;
    }
  }
  // The largest drift of a case within the budget that no case over it undercuts.
  for (const FidelityCase& c : cal.cases)
    if (c.loss <= budget_of(c.metric, budget_points, budget_bits) && c.drift < v.over_drift)
      v.within_drift = std::max(v.within_drift, c.drift);
  const std::string figures =
      fmt::format("drift {:.3f}, update cosine {:.3f}, residual {:.2f} of the gradient", f.drift,
                  f.update_cosine, f.residual);
  const std::string boundary = fmt::format(
      "calibrated on {} cases: {} within the budget up to drift {:.3f}{}",
      v.cases_within + v.cases_over, v.cases_within, v.within_drift,
      v.cases_over > 0 ? fmt::format(", {} over it from drift {:.3f}", v.cases_over, v.over_drift)
                       : std::string(", none over it"));
  if (!std::isfinite(f.drift) || !std::isfinite(f.update_cosine)) {
    v.risk = FidelityRisk::kOver;
    v.why = "its replayed updates were not finite";
  } else if (f.residual_growth > kResidualGrowthLimit) {
    v.risk = FidelityRisk::kOver;
    v.residual_growing = true;
    v.why = fmt::format(
        "its error-feedback residual grew {:.1f}x over the window's second half "
        "(more than {:.0f}x): {}",
        f.residual_growth, kResidualGrowthLimit, figures);
  } else if (f.drift <= v.within_drift) {
    v.risk = FidelityRisk::kWithin;
    v.why = fmt::format("{}; {}", figures, boundary);
  } else if (f.drift >= v.over_drift) {
    v.risk = FidelityRisk::kOver;
    v.why = fmt::format("{}; {}", figures, boundary);
  } else {
    v.risk = FidelityRisk::kUnknown;
    v.why = fmt::format("{}, beyond every case known to keep its accuracy; {}", figures, boundary);
  }
  return v;
}

nlohmann::json fidelity_json(const CodecFidelity& f) {
  return {{"steps", f.steps},
          {"update_cosine", f.update_cosine},
          {"drift", f.drift},
          {"residual", f.residual},
          {"residual_growth", f.residual_growth}};
}

nlohmann::json verdict_json(const FidelityVerdict& v) {
  return {{"risk", risk_name(v.risk)},
          {"within_drift", v.within_drift},
          {"over_drift", std::isfinite(v.over_drift) ? nlohmann::json(v.over_drift) : nullptr},
          {"cases_within", v.cases_within},
          {"cases_over", v.cases_over},
          {"residual_growing", v.residual_growing},
          {"why", v.why}};
}

}  // namespace loom::perf
