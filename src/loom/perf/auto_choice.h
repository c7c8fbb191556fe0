// codec = "auto", sync = "auto", sync.bucket_kib = "auto": loom chooses how replicas agree
// from what it measured on this machine and the cost model's prediction, within an accuracy
// budget. A pure function of its inputs (perf runs nothing): the measurements come from the
// start of a run (measure/auto_probe.h) or from a calibration file of this machine
// (calibration.h), the accuracy costs from data/perf/codec_accuracy.toml.
//
// Candidates: every allowed codec x strategy (allreduce; block momentum with its tau) x bucket
// size. Each is predicted by CostModel on one machine of `ranks` workers whose compute is the
// measured step (Derating::sample_s) and whose link is the alpha-beta fit of the collectives
// timed on the run's own transport, with the codecs' measured encode and decode speeds.
// The parameter server and two-level allreduce are not candidates: the first changes which
// ranks train, the second exists only across machines of several ranks.
//
// Accuracy: fp32 through the allreduce is exact (lossless). Every other option is lossy and
// allowed only when
//   auto.lossy = "auto" (the default): a row of the accuracy table matches the run (family,
//                optimizer, workers, codec, strategy) and its loss is within
//                auto.max_accuracy_delta, or no row does and the codec's fidelity on the run's
//                own gradients maps to a cost within the budget (codec_fidelity.h). A row or
//                a fidelity over the budget excludes it; so does a fidelity whose cost is
//                unknown, and so does no evidence at all (at the start, before the fidelity
//                is measured; block momentum, whose local steps no replay of gradients shows);
//   auto.lossy = true:  also where the cost is unknown or unmeasured (not over the budget);
//   auto.lossy = false: never.
// The fastest allowed candidate wins, except that a lossy one must beat the best lossless one
// by min_gain; the runner-up is the fastest other configuration (codec, strategy) allowed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/perf/calibration.h"
#include "loom/perf/codec_fidelity.h"
#include "loom/perf/cost_model.h"
#include "loom/perf/validation_set.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// What a measured accuracy cost depends on, and what a run is matched on: the network's family
// (the built-in model or zoo graph it is; "" for a graph of the user's own, which no row
// describes), its optimizer ("sgd", "sgd_momentum", "adam", "adamw"), the workers, and
// whether its accuracy is counted in points (classification) or bits (a token run).
struct NetworkKey {
  std::string family, optimizer;
  int workers = 2;
  AccuracyMetric metric = AccuracyMetric::kPoints;
};

// One measured accuracy cost: a network of `family` trained by `optimizer` on `workers` with
// `codec` through `sync` (tau for bmuf; 0 otherwise), its difference from fp32 in the network's
// metric, and how it was measured. A row applies only to a run that matches all of them.
struct AccuracyDelta {
  std::string family, optimizer, codec, sync;
  int workers = 2;
  int tau = 0;
  // The configuration's figure minus fp32's: test accuracy in points (metric kPoints; negative
  // is worse), or the validation loss in bits per byte or token (kBits; positive is worse).
  AccuracyMetric metric = AccuracyMetric::kPoints;
  double delta = 0;
  int seeds = 1, epochs = 0;
  std::string source;  // the command that measured it
  // Accuracy lost against fp32 in the metric's unit (negative: better than fp32).
  double loss() const { return metric == AccuracyMetric::kPoints ? -delta : delta; }
  std::string delta_text() const;  // "-0.21 points", "+0.0002 bits"
};

struct AccuracyTable {
  std::string file;
  std::vector<AccuracyDelta> rows;
  // The mapping from a codec's fidelity on the run's gradients to its accuracy cost, for the
  // runs no row describes (codec_fidelity.h).
  FidelityCalibration fidelity;
  const AccuracyDelta* find(const NetworkKey& network, const std::string& codec,
                            const std::string& sync, int tau) const;
};

// Version 3 adds rows in bits (a token run's loss); version 2's rows, all in points, still read.
inline constexpr int64_t kAccuracyTableFormatVersion = 3;
// The tables compiled in: data/perf/codec_accuracy.toml and data/perf/codec_fidelity.toml.
AccuracyTable builtin_accuracy_table();
// InputError naming the file, row and field for a malformed, older (1) or newer table.
AccuracyTable parse_accuracy_table(const std::string& text, const std::string& name);

// What the choice depends on, measured on this machine for this run.
struct AutoMeasurements {
  double compute_s = 0;  // one worker's forward + backward + update, all workers computing
  double forward_s = 0;  // of compute_s, the forward and loss (0: not timed apart)
  // The share of the compute's rate that the communication thread takes beside backward while
  // an overlapped exchange runs (cost_model.h, link_steal): 0 until a check measured it.
  double link_steal = 0;
  LinkFit link;  // the run's transport: ring alpha and bytes/s, fitted
  std::map<std::string, std::pair<double, double>> codec_gbs;  // encode, decode (fp32 GB/s)
  std::string source;  // "measured at start" or the calibration file
  double cost_s = 0;   // seconds the measuring took (0: read from a file)
  // Each lossy codec's fidelity on the run's own gradients (codec_fidelity.h), averaged over
  // the workers: empty at the start, measured over the first steps for the check.
  std::vector<CodecFidelity> fidelity;
  // Where the fidelity will come from while it is not there yet ("" = it will not: no check).
  std::string fidelity_pending;
  const CodecFidelity* fidelity_of(const std::string& codec) const;
};

enum class LossyPolicy { kMeasured, kAlways, kNever };

struct AutoRequest {
  Workload workload;   // layers (parameters, FLOPs) in forward order
  NetworkKey network;  // what the accuracy table's rows are matched on
  int ranks = 2;
  int64_t batch = 128;              // per worker
  bool overlap = false;             // buckets combined during backward (sync/overlap_policy.h)
  int64_t total_steps = 0;          // for the 1-bit warm-up's share of the run
  std::vector<std::string> codecs;  // allowed; one when the config fixes it
  std::vector<std::string> syncs;   // "allreduce", "bmuf"; one when fixed
  std::vector<int64_t> bucket_kib;  // candidates; one when fixed
  int bmuf_tau = 8;
  LossyPolicy lossy = LossyPolicy::kMeasured;
  double max_accuracy_delta = 0.5;  // points of test accuracy below fp32
  double max_bits_delta = 0.05;     // bits per byte or token above fp32's loss (a token run)
  // The budget in the network's own metric: max_accuracy_delta or max_bits_delta.
  double budget() const {
    return network.metric == AccuracyMetric::kPoints ? max_accuracy_delta : max_bits_delta;
  }
  // A lossy option must be predicted this much faster than the best lossless one to be
  // chosen: a smaller gain is inside the model's error on this machine (docs/perf.md:
  // within 15%, most runs within 5%) and not worth an accuracy cost.
  double min_gain = 0.05;
};

struct AutoCandidate {
  std::string codec = "fp32", sync = "allreduce";
  int tau = 0;  // bmuf only
  int64_t bucket_kib = 4096;
  StepEstimate estimate;
  std::optional<AccuracyDelta> measured;  // the matching row (none: lossless or unmeasured)
  // Its fidelity on the run's gradients and what the calibration makes of it (lossy codecs
  // through the allreduce, once measured).
  std::optional<CodecFidelity> fidelity;
  std::optional<FidelityVerdict> verdict;
  std::string excluded;  // why it may not be chosen ("" = allowed)
  bool lossless() const { return codec == "fp32" && sync == "allreduce"; }
  std::string label() const;  // "onebit, bmuf tau 8, buckets 4096 KiB"
};

struct AutoDecision {
  AutoCandidate chosen;
  std::optional<AutoCandidate> runner_up;
  std::vector<AutoCandidate> candidates;  // all of them, fastest first
  double fp32_samples_per_s = 0;          // the exact baseline (fp32 allreduce, best buckets)
  std::string reason;                     // why, in a sentence or three
};

// The decision; InputError for an empty or unknown candidate list or missing measurements.
AutoDecision decide_auto(const AutoRequest& r, const AutoMeasurements& m,
                         const AccuracyTable& accuracy);

// The running candidate's prediction, steady state (without the 1-bit warm-up's exact steps,
// which the check window comes after).
StepEstimate predict_candidate(const AutoRequest& r, const AutoMeasurements& m,
                               const AutoCandidate& k);

// The error the cost model is validated to on the machines loom runs on: docs/perf.md,
// "Validation", `loom scale --validate` (16 local runs, thread and MPI, shaped and not, all
// within 15%) and `loom scale --anchors` (published cases, each within 15%). A measured step
// further than this from its prediction contradicts the model, and auto re-decides once.
inline constexpr double kModelValidatedError = kPassMark;

// What the run measured over its check window, averaged over the ranks: the mean step (the
// loader's wait included) and the part of it the loop waited for communication.
struct AutoObservation {
  int64_t first_step = 0, steps = 0;  // the window: steps [first_step, first_step + steps)
  double step_s = 0;
  double exposed_comm_s = 0;
  // The step's forward and loss, which run with no exchange beside them (0: not timed): against
  // the start-up's forward, the compute's own speed in the window.
  double forward_s = 0;
};

enum class RevisionOutcome {
  kAgrees,    // the step is within kModelValidatedError of the prediction: nothing to revise
  kKept,      // off, but the corrected model keeps the running choice
  kSwitched,  // off, and the corrected model ranks another candidate first by min_gain
};

struct AutoRevision {
  RevisionOutcome outcome = RevisionOutcome::kAgrees;
  AutoObservation observed;
  AutoCandidate before;  // the running choice, predicted by the start-up measurements
  double predicted_step_s = 0, predicted_exposed_s = 0;
  double error = 0;  // predicted step over measured step, minus 1
  // The corrections folded in (1: that term agreed): the step's compute multiplied by
  // compute_factor and the link's time (alpha and 1/bandwidth) by link_factor, so that the
  // running choice's prediction reproduces the window; link_steal, the share of the compute's
  // rate the communication thread took beside backward (0: none found).
  double compute_factor = 1, link_factor = 1, link_steal = 0;
  AutoMeasurements corrected;
  std::optional<AutoDecision> revised;  // the decision on `corrected` (when off)
  AutoCandidate after;                  // what runs from here on (== before unless switched)
  std::string reason;
  bool switched() const { return outcome == RevisionOutcome::kSwitched; }
};

// The check and the one re-decision: a pure function of the start-up request and
// measurements (with the fidelity measured since the start, when there is some), the running
// choice and the window's figures. When the measured step is within kModelValidatedError of the
// running choice's prediction, the timing stands; with fidelity figures the candidates are
// then ranked again on the start-up figures with the accuracy the fidelity gives. Otherwise the
// measurement is folded in where it contradicts the prediction (a term off by more than half
// the bound, as a share of the step): the link's time is scaled until the running choice's
// predicted exposed communication equals the measured one, and/or the compute until the rest
// of its predicted step equals the rest of the measured step (a few alternating passes when
// both, as the overlap couples them). When the running choice overlaps its exchange with
// backward and the window timed its forward, the compute is scaled by the forward's own
// factor (nothing runs beside the forward), and what the rest of the step holds beyond that is
// the communication thread's share of the compute beside backward (link_steal, at most all of
// it; a larger excess scales the compute further): an exchange that no longer overlaps, as
// block momentum's, does not pay it. Every candidate is predicted again on the corrected
// figures with the same accuracy rules (decide_auto). The running choice is replaced when the
// new first one is predicted at least min_gain faster than it on those figures, or at once
// when the accuracy rules now exclude it (its fidelity is over the budget or unknown): the
// run falls back to the best allowed option.
AutoRevision revise_auto(const AutoRequest& r, const AutoMeasurements& m,
                         const AccuracyTable& accuracy, const AutoCandidate& running,
                         const AutoObservation& o);

// Lines for the log, and summary.json's "auto.revision".
std::string describe_revision(const AutoRevision& v);
nlohmann::json revision_json(const AutoRevision& v);
// Whether two candidates are the same configuration (codec, strategy, tau, bucket size).
bool same_configuration(const AutoCandidate& a, const AutoCandidate& b);

// The measurements from a calibration file of this machine (its fit for `transport`, its codec
// speeds, and the compute the host model predicts for `r`). InputError when the file lacks
// them.
AutoMeasurements measurements_from_calibration(const Calibration& cal, const std::string& transport,
                                               const AutoRequest& r, int threads);

// Lines for the log and `loom advise --run`: the choice, the runner-up, the fp32 baseline and
// every candidate's prediction.
std::string describe_decision(const AutoDecision& d, const AutoMeasurements& m, size_t top = 8);
// For summary.json and the report.
nlohmann::json decision_json(const AutoDecision& d, const AutoMeasurements& m);

}  // namespace loom::perf
