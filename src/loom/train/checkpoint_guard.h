// What the training loop calls around each step for reliability (docs/reliability.md):
// resuming from a checkpoint, the NaN/Inf policy, SIGINT/SIGTERM, and periodic checkpoints.
// The loop stays ignorant of the details:
//
//   StepGuard guard(cfg, comm, parts, steps_per_epoch, seed, validation_split);
//   int64_t step = guard.resume();                      // 0, or the checkpoint's step
//   strategy->start();  guard.restore_strategy();
//   ... per step:  guard.begin_step(step);  lr *= guard.lr_scale();
//                  guard.check_loss(...);  backward with guard.check_grads(range) first;
//                  strategy->end_step();
//                  switch (guard.end_step(step + 1)) { kDone, kSkipped, kStop }
//
// end_step is a collective when the world has more than one rank: every rank contributes its
// flags (non-finite numbers, a stop signal, rank 0's clock for time-based checkpoints) to one
// allreduce of three integers, so all ranks take the same decision at the same step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/core/timer.h"
#include "loom/train/checkpoint.h"
#include "loom/train/signals.h"

namespace loom::train {

enum class NanPolicy { kAbort, kSkip };

struct GuardOptions {
  std::string checkpoint_root;  // <output.dir>/checkpoints; "" = no checkpoints
  int64_t every_steps = 0;      // train.checkpoint_every (0 = off)
  double every_minutes = 0;     // train.checkpoint_minutes (0 = off)
  int keep = 3;                 // train.checkpoint_keep
  std::string resume;           // train.resume (set by `loom train --resume DIR`)
  NanPolicy nan_policy = NanPolicy::kAbort;
  double nan_lr_factor = 0.5;  // train.nan_lr_factor: lr scale *= this per skipped step
  int64_t nan_max_skips = 5;   // train.nan_max_skips: consecutive skips before aborting
  bool check_grads = true;     // train.nan_check_grads
  bool checkpoints() const {
    return !checkpoint_root.empty() && (every_steps > 0 || every_minutes > 0);
  }
};

// Keys: train.checkpoint_every, train.checkpoint_minutes, train.checkpoint_keep, train.resume,
// train.nan_policy, train.nan_lr_factor, train.nan_max_skips, train.nan_check_grads.
std::vector<ConfigKeySpec> checkpoint_config_keys();
GuardOptions read_guard_options(const Config& cfg);

class StepGuard {
 public:
  enum class Outcome { kDone, kSkipped, kStop };

  // validation_split: TrainPosition::validation_split of this run (0: nothing held out);
  // vocabulary: TrainPosition::vocabulary (0: not a token run).
  // global_batch: samples per step over all ranks (TrainPosition::global_batch).
  StepGuard(const Config& cfg, comm::Communicator& c, WorkerParts parts, int64_t steps_per_epoch,
            uint64_t seed, uint64_t validation_split = 0, uint64_t vocabulary = 0,
            int64_t global_batch = 0);
  // Before Strategy::start(): loads the newest checkpoint under train.resume (if set) on every
  // rank (parameters, optimizer, position) and returns the global step to continue from (0
  // without resume). After start(), restore_strategy() hands the strategy its sections.
  int64_t resume();
  bool resumed() const { return !opt_.resume.empty(); }  // train.resume set (resume() succeeded)
  void restore_strategy();
  float lr_scale() const { return float(pos_.lr_scale); }
  void begin_step(int64_t step);
  // This rank's loss for its batch. Non-finite: remembered for end_step (the step still runs,
  // so the ranks stay in lockstep).
  void check_loss(double loss_sum, int64_t step);
  // During backward, before the strategy sees the range (host memory only).
  void check_grads(const nn::ParamRange& range);
  // After Strategy::end_step. kSkipped: a rank saw NaN/Inf under the skip policy and the step
  // was rolled back; kStop: a stop signal arrived, a checkpoint was written, leave the loop.
  // Throws NumericError (step, rank, layer) under the abort policy or after too many skips.
  Outcome end_step(int64_t steps_done);
  bool interrupted() const { return interrupted_; }
  bool writes_checkpoints() const { return opt_.checkpoints(); }
  const std::string& last_checkpoint() const { return last_checkpoint_; }

 private:
  std::string write_checkpoint(int64_t steps_done);
  std::string describe_bad(int64_t code) const;

  GuardOptions opt_;
  std::string config_text_;
  comm::Communicator& comm_;
  WorkerParts parts_;
  TrainPosition pos_;
  StopSignalScope signals_;
  StepSnapshot snapshot_;
  Stopwatch since_checkpoint_;
  int64_t step_ = 0;
  int64_t bad_code_ = 0;  // (kind << 40) | ((rank + 1) << 20) | (layer + 1); 0 = all finite
  bool interrupted_ = false;
  bool previous_skip_loss_bad_ = false;  // the last step was skipped for a NaN/Inf loss
  std::string last_checkpoint_;
  std::vector<CheckpointFile> resumed_rank_files_;  // until restore_strategy()
  bool resumed_same_world_ = true;
  std::string resumed_dir_;
};

}  // namespace loom::train
