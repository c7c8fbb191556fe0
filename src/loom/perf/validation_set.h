// The published results the model is checked against (data/hardware/validation.toml, built
// in): each case's system, predicted by the cost model, and the error of the figure the source
// published. `loom scale --anchors` prints the table; tests/perf/validation_test.cc holds the
// protocol (docs/perf.md).
//
// The protocol:
// - every case names its `publication`; its compute never comes from a [[rate]] row of that
//   publication;
// - the fitted parameters are the GPU roofline's efficiencies (gpu_roofline.h kComputeFit,
//   fitted on every throughput case whose compute is the roofline's, and on the catalog's
//   [[rate]] rows) and the step-time jitter (cost_model.h kStepJitterCv, fitted on every case);
// - leave-one-source-out: for each publication, both are refitted without its cases and rows,
//   and its cases are predicted with the refit.
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/compute_fit.h"
#include "loom/perf/cost_model.h"
#include "loom/perf/workload.h"

namespace loom::perf {

inline constexpr double kPassMark = 0.15;  // |error| within 15% of the published figure

struct ValidationCase {
  std::string name, source, figure, note;
  std::string publication;  // what LOSO leaves out together; [[rate]] rows share the key
  std::string software;     // what trained it: "pytorch", "tensorflow", ... or "unstated"
  double published = 0;
  int baseline_gpus = 1;
  std::string workload, gpu, precision = "fp32";
  std::string layout = "nhwc";  // the run's memory format (gpu_roofline.h)
  int64_t batch = 64;
  int nodes = 1, gpus_per_node = 1, nics_per_node = 1, servers = 1;
  std::string intra, inter;
  std::string algorithm = "ring";
  bool colocated = false, aggregate = false;
  std::string codec = "fp32", base_codec;
  double bucket_mb = 25;
  bool overlap = true;
  std::string framework = "none";
  int64_t accumulate = 1;  // micro-batches per optimizer step
  bool decoder = false;    // workload "decoder": the shape below
  DecoderShape decoder_shape;
  int gpus() const { return nodes * gpus_per_node; }
  Workload workload_spec() const;
};

struct CaseResult {
  ValidationCase c;
  double predicted = 0;
  StepEstimate est;             // the case's step at its full size (with `codec`)
  std::string compute;          // where the compute came from (compute_model.h describe)
  double fraction_of_peak = 0;  // executed FLOP/s over peak of that compute
  // The case's GPU generation and precision class (MathPlan::rate_class): what its error says
  // of other predictions (prediction_band).
  std::string generation, precision_class;
  double error() const { return (predicted - c.published) / c.published; }
  bool ok() const { return std::abs(error()) <= kPassMark; }
};

// The built-in cases, and the catalog they run on (the built-in one plus the links the
// sources measured, from validation.toml's [[link]] rows).
std::vector<ValidationCase> validation_cases();
Catalog validation_catalog();
// Parses a validation file's text (cases and [[link]] rows); `name` names it in errors.
std::vector<ValidationCase> parse_validation(const std::string& text, const std::string& name,
                                             Catalog* links_into = nullptr);

CaseResult predict_case(const Catalog& cat, const ValidationCase& c,
                        double jitter_cv = kStepJitterCv, const ComputeFit& fit = kComputeFit);

// The throughput figures whose compute is the roofline's, as points to fit it on: the cases'
// (figure samples_per_s) and the catalog's [[rate]] rows; those of `left_out` are left out.
// Each point's rest of the step (communication, stragglers) is the model's with `jitter_cv`
// and the compute of `held`.
std::vector<FitPoint> compute_fit_points(const Catalog& cat,
                                         const std::vector<ValidationCase>& cases,
                                         const std::string& left_out = "",
                                         double jitter_cv = kStepJitterCv,
                                         const ComputeFit& held = kComputeFit);

// Most rounds of refitting the roofline and the jitter in turn for each left-out publication;
// a fold stops sooner where a round returns the fit it started from (its fixed point: both
// fits move on grids, so they repeat exactly).
inline constexpr int kLeaveOutRounds = 8;

struct ErrorSummary {
  double mean_abs = 0, max_abs = 0;
  int misses = 0;
};
ErrorSummary summarize(const std::vector<double>& errors);
// The root mean square of `errors` (0 for none): a band about two errors in three fall within.
double rms(const std::vector<double>& errors);

struct ValidationRun {
  std::vector<CaseResult> results;  // with kStepJitterCv and kComputeFit
  std::vector<double> loo_errors;   // each case predicted with both refitted without its source
  std::vector<double> loo_jitter;   // that refitted jitter
  std::vector<ComputeFit> loo_fit;  // and that refitted compute
  double fitted_jitter = 0;         // refitted on all cases (should equal kStepJitterCv)
  ComputeFit fitted_compute;        // refitted on all points (should equal kComputeFit)
  std::vector<std::string> compute_fit_on;  // the points it is fitted on
  ErrorSummary in_sample, loo;
  // Throughput (samples_per_s) and scaling (the other figures) cases apart.
  ErrorSummary loo_throughput, loo_scaling;
};
ValidationRun run_validation(bool leave_one_out = true);

// The band of a prediction for `gpus` GPUs of `g` at `precision`: the leave-one-source-out
// errors of the throughput cases of its generation and precision class (their root mean
// square is the band, about two published figures in three lying within it; their mean |error|
// is the typical error); with fewer than two such cases, the wider band of its generation or of
// its precision class, widened by a quarter, and with neither, all throughput cases'. Several
// GPUs add the scaling cases' root mean square in quadrature.
struct PredictionBand {
  double band = 0, typical = 0;
  int cases = 0;      // throughput cases of its generation and precision
  std::string basis;  // "ampere mixed: 10 cases", "no hopper tf32 case: ampere tf32 + 25%"
};
PredictionBand prediction_band(const ValidationRun& run, const GpuSpec& g,
                               const std::string& precision, int gpus);
// The built-in set's run, computed once.
const ValidationRun& builtin_validation();

// A GPU's generation by its compute capability: kepler, pascal, volta, turing, ampere, ada,
// hopper, blackwell ("other" for a GPU loom does not run).
std::string gpu_generation(const GpuSpec& g);

// The table `loom scale --anchors` prints: every case with its figure, published, predicted,
// error and leave-one-out error, then the distributions and each case's inputs and sources.
std::string validation_report(const ValidationRun& run);

}  // namespace loom::perf
