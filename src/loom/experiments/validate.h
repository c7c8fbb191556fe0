// `loom scale --validate`: the performance model against real loom runs on this machine.
// Each case trains the configured model for a fixed number of steps (workers as threads of
// this process, or MPI ranks launched through mpirun) and compares the measured step time
// (training-loop wall time / steps) with the cost model's prediction from the calibration:
// workload computed from the same loom config, device "this-machine" with its host rates
// (host_model.h), link "this-machine-<transport>", storage "this-machine-loader".
#pragma once

#include <string>
#include <vector>

#include "loom/perf/calibration.h"
#include "loom/perf/cost_model.h"
#include "loom/plan/run_plan.h"

namespace loom::experiments {

struct ValidationCase {
  int workers = 1;
  std::string codec = "fp32";        // the allreduce strategy's `codec` key
  std::string transport = "thread";  // thread or mpi
  double link_gbps = 0;              // > 0: mpi ranks on a link shaped to this rate
  std::string label() const;
};

struct Measured {
  int64_t steps = 0;
  double step_s = 0, compute_s = 0, exposed_s = 0, loader_wait_s = 0;  // per step
};

struct ValidationRow {
  ValidationCase c;
  perf::StepEstimate predicted;
  Measured measured;
  double error() const;  // (predicted - measured) / measured step time
};

// The comparison arithmetic: signed relative error of a prediction, and whether it is within
// `tolerance` (a fraction: 0.15 = 15%) either way.
double prediction_error(double predicted, double measured);
bool within_tolerance(double error, double tolerance);

// The model's estimate of one case: `run` is the plan of the runs (model, batch, threads,
// optimizer, sync.bucket_kib); the calibration must have the host rates and, for more than one
// worker, allreduce lines of the case's transport.
perf::StepEstimate predict_case(const plan::RunPlan& run, const perf::Calibration& cal,
                                const ValidationCase& c);

// How MPI cases are launched: `<mpirun> -np N <loom> train FILE`. A script that runs the
// ranks in network namespaces (a shaped link) passes its own launcher line.
inline const char* kDefaultMpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none";

// Runs the case: in-process for the thread transport; `<mpirun> -np N <loom> train` for mpi
// (`loom_path` = this executable). `steps` training steps, evaluation off.
Measured measure_case(const plan::RunPlan& run, const ValidationCase& c, int64_t steps,
                      const std::string& loom_path, const std::string& mpirun = kDefaultMpirun);

// Replaces `host`'s rates for the shapes `before` and `after` measured with their mean
// (paired calibration: measured next to the run, under the same load).
void merge_paired_rates(perf::HostRates& host, const perf::HostRates& before,
                        const perf::HostRates& after);

// The table printed by `loom scale --validate` (with the load average next to it) and one
// JSON object per row.
std::string validation_table(const std::vector<ValidationRow>& rows, double tolerance);
std::string validation_json(const std::vector<ValidationRow>& rows);

// "0.52 0.61 0.70" from /proc/loadavg ("?" when unreadable).
std::string load_average();

}  // namespace loom::experiments
