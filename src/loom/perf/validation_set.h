// The published results the model is checked against (data/hardware/validation.toml, built
// in): each case's system, predicted by the cost model with nothing fitted to that case, and
// the error of the figure the source published. `loom scale --anchors` prints the table;
// tests/perf/validation_test.cc holds every case within kPassMark.
//
// The one fitted parameter is the step-time jitter (cost_model.h kStepJitterCv); its training
// subset is the whole set. Leave-one-out refits it without each case and predicts that case
// with the refitted value, so every case is also scored by a model that never saw it.
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"

namespace loom::perf {

inline constexpr double kPassMark = 0.15;  // |error| within 15% of the published figure

struct ValidationCase {
  std::string name, source, figure, note;
  double published = 0;
  int baseline_gpus = 1;
  std::string workload, gpu, precision = "fp32";
  int64_t batch = 64;
  int nodes = 1, gpus_per_node = 1, nics_per_node = 1, servers = 1;
  std::string intra, inter;
  std::string algorithm = "ring";
  bool colocated = false, aggregate = false;
  std::string codec = "fp32", base_codec;
  double bucket_mb = 25;
  bool overlap = true;
  std::string framework = "none";
  int gpus() const { return nodes * gpus_per_node; }
};

struct CaseResult {
  ValidationCase c;
  double predicted = 0;
  StepEstimate est;             // the case's step at its full size (with `codec`)
  std::string compute;          // where the compute came from (compute_model.h describe)
  double fraction_of_peak = 0;  // executed FLOP/s over peak of that compute
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
                        double jitter_cv = kStepJitterCv);

// The jitter that minimises the mean absolute error over `cases` (grid of 0.0001 on [0, 0.2]).
double fit_jitter(const Catalog& cat, const std::vector<ValidationCase>& cases);

struct ErrorSummary {
  double mean_abs = 0, max_abs = 0;
  int misses = 0;
};
ErrorSummary summarize(const std::vector<double>& errors);

struct ValidationRun {
  std::vector<CaseResult> results;  // with kStepJitterCv
  std::vector<double> loo_errors;   // each case predicted with the jitter refitted without it
  std::vector<double> loo_jitter;   // that refitted jitter
  double fitted_jitter = 0;         // refitted on all cases (should equal kStepJitterCv)
  ErrorSummary in_sample, loo;
  bool ok() const { return in_sample.misses == 0 && loo.misses == 0; }
};
ValidationRun run_validation(bool leave_one_out = true);

// The table `loom scale --anchors` prints: every case with its figure, published, predicted,
// error and leave-one-out error, then the distributions and each case's inputs and sources.
std::string validation_report(const ValidationRun& run);

}  // namespace loom::perf
