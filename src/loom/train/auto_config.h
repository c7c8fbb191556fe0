// codec = "auto", sync = "auto", sync.bucket_kib = "auto" at the start of a run: measure
// (measure/auto_probe.h) or read a calibration file of this machine (auto.calibration),
// decide with the cost model within the accuracy budget (perf/auto_choice.h), and revise the
// run's plan with the choice (plan::with_sync_choice) before its strategy is built. Keys:
//   auto.max_accuracy_delta  points of test accuracy below fp32 a lossy option may cost (0.5)
//   auto.lossy               "auto" (lossy only with a measured delta), true, false
//   auto.calibration         a `loom bench calibrate` file of this machine to use instead of
//                            measuring ("" = measure)
//   auto.calibration_mismatch  "error" (default) or "measure": a file from another machine
//                            (CPU, transport, world size) is an error, or a warning and loom
//                            measures instead
//   auto.check_after         steps after the start before the check window (10)
//   auto.check_steps         steps the check window measures (20; 0 = no check); rounded up to
//                            a whole number of blocks with block momentum
// After the window, the measured step is compared with the prediction, and auto re-decides
// once when it is off by more than the model's validated error (perf::revise_auto); the
// trainer switches at that step boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/measure/fidelity_probe.h"
#include "loom/nn/layers/layer.h"
#include "loom/optim/optimizer.h"
#include "loom/perf/auto_choice.h"
#include "loom/plan/auto_reader.h"
#include "loom/plan/run_plan.h"
#include "loom/tensor/backend.h"

namespace loom::train {

// The codecs codec = "auto" measures and weighs: those whose record says so
// (compress/codec_kind.h), in the registry's order. The cost model predicts each and the
// start-up measures its encode and decode speed on a flat gradient; a lossy one is chosen only
// with a measured accuracy delta (data/perf/codec_accuracy.toml).
std::vector<std::string> auto_candidate_codecs();

struct AutoResolution {
  bool active = false;
  // A decision was made here from measurements (not kept from a checkpoint, not one worker):
  // only such a choice has a prediction to check.
  bool decided = false;
  std::string kept_from;  // the checkpoint whose choice a resume kept ("" = none)
  perf::AutoRequest request;
  perf::AutoDecision decision;
  perf::AutoMeasurements measured;
  // Which keys were "auto" (a revision writes only those).
  bool codec_auto = false, sync_auto = false, bucket_auto = false;
  // The choice for those keys and its record, and the source it names (nullopt: not active).
  std::optional<plan::SyncChoice> choice;
  std::string choice_where;
  std::string log;   // what the log says (describe_decision)
  std::string json;  // summary.json's "auto" object, serialised
};

// Collective over `comm`: every rank calls it with the same plan and gets the same choice, for
// plan::with_sync_choice to revise the plan with. `input` / `classes`: the training data's
// sample shape and outputs, for a probe copy of the model; `token_run`: its accuracy is a
// validation loss in bits (auto.max_bits_delta), not test accuracy in points.
AutoResolution resolve_auto(const plan::RunPlan& run, comm::Communicator& comm, Backend& backend,
                            const nn::Shape& input, int classes, int64_t total_steps,
                            bool token_run = false);

// summary.json's "auto": the decision (AutoResolution::json) and the check of its prediction
// against the run's measured samples/s: "check": {"measured_samples_per_s", "error" (predicted
// over measured, minus 1), "within_model_error" (|error| <= perf::kModelValidatedError)}.
// After a switch (decision_json's "revision" with outcome "switched") the prediction checked
// is the new choice's on the corrected figures.
nlohmann::json auto_summary(const std::string& decision_json, double measured_samples_per_s);

// The check window of a run that trains from `start_step` to `total_steps`: steps [first,
// first + steps). steps = 0 when there is none, and `skipped` says why (for the log and
// summary.json).
struct AutoCheckWindow {
  int64_t first = 0, steps = 0;
  std::string skipped;
  bool active() const { return steps > 0; }
  bool holds(int64_t step) const { return step >= first && step < first + steps; }
  int64_t end() const { return first + steps; }
};
AutoCheckWindow auto_check_window(const plan::AutoOptions& o, const AutoResolution& res,
                                  int64_t start_step, int64_t total_steps);

// The sharded optimizer (ZeRO-1) before a switch: each rank's buffers are current only on the
// elements it owns (`owned`, Strategy::optimizer_owned; empty: all of them, nothing to do).
// Collective: every element has one owner, so the sum over the ranks of each one's owned
// elements (zero elsewhere) is the whole state, bit for bit, on every rank.
void gather_optimizer_state(comm::Communicator& comm, Backend& backend, optim::Optimizer& optimizer,
                            const std::vector<std::pair<int64_t, int64_t>>& owned);

// A switched revision's choice for the keys that were "auto", with auto.revised saying what
// changed (and what the log says).
plan::SyncChoice revision_choice(const AutoResolution& res, const perf::AutoRevision& v,
                                 int64_t step);

// The replay that measures each lossy candidate codec's fidelity on this rank's gradients from
// the run's start to the end of the check window (measure/fidelity_probe.h), from the model's
// parameters now. nullptr when the decision waits for no fidelity (fidelity_pending empty: no
// lossy codec through the allreduce, auto.lossy = false, no check) or the window is inactive.
std::unique_ptr<measure::FidelityProbe> make_fidelity_probe(const AutoResolution& res,
                                                            const plan::RunPlan& run,
                                                            const AutoCheckWindow& window,
                                                            nn::Model& model, Backend& backend);

// Collective: each codec's figures averaged over the ranks (each replays its own gradients),
// rank 0's on every rank bit for bit so that every rank decides alike.
std::vector<perf::CodecFidelity> gather_fidelity(comm::Communicator& comm,
                                                 const measure::FidelityProbe& probe);

}  // namespace loom::train
