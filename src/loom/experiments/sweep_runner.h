// Runs a sweep's trials as child processes, each on its own device slot: a GPU through
// CUDA_VISIBLE_DEVICES, or a set of CPU cores through sched_setaffinity. Trials queue when they
// outnumber slots; a failed trial is recorded (exit code, last lines of stderr) and the others
// go on; finished trials recorded in <dir>/state.json are not run again.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "loom/experiments/sweep_spec.h"
#include "loom/experiments/sweep_state.h"

namespace loom::experiments {

struct SweepRunOptions {
  // argv before the base config and the --set overrides; empty = {this executable, "train"}.
  std::vector<std::string> command;
  bool retry_failed = false;                    // rerun trials recorded as failed
  int64_t slots = 0;                            // overrides the sweep file's slots when > 0
  std::function<void(const std::string&)> log;  // progress lines; null = silent
};

struct SweepOutcome {
  std::vector<TrialRecord> records;  // in trial order
  int64_t ran = 0, skipped = 0;      // skipped: finished in an earlier run of the sweep
  int64_t slots = 0;
  double seconds = 0;
};

// One slot's placement: the cores a trial is pinned to, or the GPU it sees.
struct DeviceSlot {
  int index = 0;
  std::vector<int> cores;  // empty: no pinning
  int64_t gpu = -1;        // >= 0: CUDA_VISIBLE_DEVICES
  std::string describe() const;
};
std::vector<DeviceSlot> plan_slots(const SweepSpec& spec, int64_t slots_override);

SweepOutcome run_sweep(const SweepSpec& spec, const SweepRunOptions& options);

// The lines the sweep logs as a trial starts and ends, numbered among all the sweep's trials so
// a reader sees how far it is: "trial 3/8 t02: optim.lr=0.1 on slot 0: cores 0,1", then
// "trial 3/8 t02 ok in 41.2 s: val_acc = 0.8512" (or its error's first line).
std::string trial_start_line(const Trial& trial, size_t trials, const DeviceSlot& slot);
std::string trial_end_line(const TrialRecord& record, size_t trials, const std::string& metric);

// The argv of one trial: command, base config, --set for the fixed keys, the trial's keys,
// progress and output.dir.
std::vector<std::string> trial_argv(const SweepSpec& spec, const Trial& trial,
                                    const std::vector<std::string>& command,
                                    const std::string& trial_dir);

}  // namespace loom::experiments
