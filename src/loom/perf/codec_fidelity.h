// How closely a lossy codec lets a run follow the exact one, and what that says of its accuracy
// cost. codec = "auto" decides from it for any network: measure/fidelity_probe.h replays the
// run's own gradients of its first steps through each candidate codec (with its error
// feedback) and a copy of the run's optimizer, beside the same optimizer on the exact
// gradients, and gives the figures below. The mapping from those figures to an accuracy cost
// is calibrated on the reference networks, whose costs were measured by training
// (data/perf/codec_fidelity.toml). A codec is within the budget when its drift is at most the
// largest drift up to which every calibration case kept its accuracy within the budget; over
// it when its drift is at least that of a case that lost more; between the two, its cost is
// unknown.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::perf {

// One codec's figures over a window of steps.
struct CodecFidelity {
  std::string codec;
  int64_t steps = 0;  // gradients replayed
  // Mean over the steps of the cosine between the exact optimizer's update and the update of
  // the same optimizer fed the codec's decoded gradient.
  double update_cosine = 1;
  // |P_codec - P_exact| / |P_exact - P_start| after the last step: how far the parameters the
  // codec's updates reach lie from the exact ones, as a share of how far the exact ones moved.
  // Error feedback keeps it small for a codec whose errors cancel over the steps; an optimizer
  // that is not linear in the gradient (Adam's variance) lets them add up.
  double drift = 0;
  // The error-feedback residual's norm over the gradient's, both averaged over the window's
  // last quarter; and the residual's mean norm over the last quarter over its mean over the
  // second quarter: a residual that keeps growing is a codec that does not keep up with the
  // gradients (a healthy one shrinks with them).
  double residual = 0;
  double residual_growth = 1;
};

// A residual growing faster than this over the window's second half makes a codec over the
// budget whatever its drift: what error feedback holds back is then not being sent later.
inline constexpr double kResidualGrowthLimit = 2.0;

// Units of an accuracy cost: points of test accuracy (classification), or bits per byte or
// token of the validation loss (a token run).
enum class AccuracyMetric { kPoints, kBits };
const char* metric_unit(AccuracyMetric m);  // "points", "bits"

// One calibration case: a reference network trained with a codec, its fidelity in the first
// steps and its accuracy cost at the recipe's length.
struct FidelityCase {
  std::string network, optimizer, codec;
  int workers = 2;
  AccuracyMetric metric = AccuracyMetric::kPoints;
  double drift = 0, update_cosine = 1;
  int64_t steps = 0;  // the window the fidelity was measured over
  // Accuracy lost against fp32 in the metric's unit (points below fp32's, or bits above;
  // negative: better than fp32), and its seeds.
  double loss = 0;
  int seeds = 1;
  std::string source;  // the commands that measured both
};

struct FidelityCalibration {
  std::string file;
  std::vector<FidelityCase> cases;
};

inline constexpr int64_t kFidelityCalibrationFormatVersion = 1;
FidelityCalibration builtin_fidelity_calibration();  // data/perf/codec_fidelity.toml
// InputError naming the file, the case and the field for a malformed or newer file.
FidelityCalibration parse_fidelity_calibration(const std::string& text, const std::string& name);

enum class FidelityRisk { kWithin, kOver, kUnknown };
const char* risk_name(FidelityRisk r);  // "within", "over", "unknown"

struct FidelityVerdict {
  FidelityRisk risk = FidelityRisk::kUnknown;
  // The calibration's boundary for the budget: every case at a drift up to `within_drift`
  // kept its accuracy within it, and the smallest drift of a case that lost more is
  // `over_drift` (infinity: none did). Cases counted on each side.
  double within_drift = 0, over_drift = 0;
  int cases_within = 0, cases_over = 0;
  // Over because the residual grows (kResidualGrowthLimit), whatever the drift: this holds
  // even where a measured row of the accuracy table speaks for the codec.
  bool residual_growing = false;
  std::string why;  // one sentence for the log
};

// The verdict on `f` for a run whose accuracy is counted in `metric` with `budget` of it
// allowed. Every case counts, whatever its metric: its loss is compared with the budget of its
// own metric (budget_points or budget_bits).
FidelityVerdict assess_fidelity(const CodecFidelity& f, const FidelityCalibration& cal,
                                double budget_points, double budget_bits);

nlohmann::json fidelity_json(const CodecFidelity& f);
nlohmann::json verdict_json(const FidelityVerdict& v);

}  // namespace loom::perf
