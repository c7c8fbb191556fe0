// codec = "auto", sync = "auto", sync.bucket_kib = "auto" at the start of a run: measure
// (measure/auto_probe.h) or read a calibration file of this machine (auto.calibration),
// decide with the cost model within the accuracy budget (perf/auto_choice.h), and write the
// choice into the run's config before its strategy is built. Keys:
//   auto.max_accuracy_delta  points of test accuracy below fp32 a lossy option may cost (0.5)
//   auto.lossy               "auto" (lossy only with a measured delta), true, false
//   auto.calibration         a `loom bench calibrate` file of this machine to use instead of
//                            measuring ("" = measure)
//   auto.calibration_mismatch  "error" (default) or "measure": a file from another machine
//                            (CPU, transport, world size) is an error, or a warning and loom
//                            measures instead
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/config.h"
#include "loom/nn/layer.h"
#include "loom/perf/auto_choice.h"
#include "loom/tensor/backend.h"

namespace loom::train {

std::vector<ConfigKeySpec> auto_config_keys();

// Whether codec, sync or sync.bucket_kib is "auto".
bool wants_auto(const Config& cfg);

struct AutoResolution {
  bool active = false;
  perf::AutoDecision decision;
  perf::AutoMeasurements measured;
  std::string log;   // what the log says (describe_decision)
  std::string json;  // summary.json's "auto" object, serialised
};

// Collective over `comm`: every rank calls it with the same config and gets the same choice,
// written into `cfg` (codec, sync, bmuf.tau, sync.bucket_kib). `input` / `classes`: the
// training data's sample shape and outputs, for a probe copy of the model.
AutoResolution resolve_auto(Config& cfg, comm::Communicator& comm, Backend& backend,
                            const nn::Shape& input, int classes, int64_t batch, int threads,
                            int64_t total_steps);

// summary.json's "auto": the decision (AutoResolution::json) and the check of its prediction
// against the run's measured samples/s: "check": {"measured_samples_per_s", "error" (predicted
// over measured, minus 1), "within_model_error" (|error| <= 15%, the tolerance the model is
// validated to on this machine, docs/perf.md)}.
nlohmann::json auto_summary(const std::string& decision_json, double measured_samples_per_s);

}  // namespace loom::train
