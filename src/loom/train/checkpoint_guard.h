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
// flags (non-finite numbers, a stop signal, rank 0's clock for time-based checkpoints, an
// overflow of its loss-scaled gradients) to one allreduce of four integers, so all ranks take
// the same decision at the same step.
//
// Dynamic loss scaling (loss_scale.*, optim/loss_scaler.h, docs/precision.md) lives here too,
// since it needs what the NaN skip policy has: the loop multiplies the loss's gradient by
// loss_scale(); check_grads divides each range by it (before the strategy sees the range) and
// notes non-finite values on the device without waiting; end_step agrees on an overflow across
// the ranks and then rolls the step back on every rank (parameters, optimizer, strategy state)
// and halves the scale, or counts a clean step. The scaler's state travels in train.ckpt.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/config_value.h"
#include "loom/core/timer.h"
#include "loom/optim/loss_scaler.h"
#include "loom/plan/train_settings.h"
#include "loom/tensor/buffer.h"
#include "loom/train/checkpoint.h"
#include "loom/train/signals.h"

namespace loom::train {

using NanPolicy = plan::NanPolicy;
using GuardOptions = plan::GuardOptions;

class StepGuard {
 public:
  enum class Outcome { kDone, kSkipped, kStop };

  // validation_split: TrainPosition::validation_split of this run (0: nothing held out);
  // vocabulary: TrainPosition::vocabulary (0: not a token run).
  // global_batch: samples per step over all ranks (TrainPosition::global_batch).
  // config_text: the run's config as Config::canonical_text gives it, which each checkpoint
  // keeps; accumulate: micro-batches per step (train.accumulate).
  StepGuard(const GuardOptions& options, std::string config_text, int64_t accumulate,
            comm::Communicator& c, WorkerParts parts, int64_t steps_per_epoch, uint64_t seed,
            uint64_t validation_split = 0, uint64_t vocabulary = 0, int64_t global_batch = 0);
  // Before Strategy::start(): loads the newest checkpoint under train.resume (if set) on every
  // rank (parameters, optimizer, position) and returns the global step to continue from (0
  // without resume). After start(), restore_strategy() hands the strategy its sections.
  int64_t resume();
  bool resumed() const { return !opt_.resume.empty(); }  // train.resume set (resume() succeeded)
  void restore_strategy();
  // Between steps, after the loop replaced the strategy (codec = "auto"'s check switched the
  // choice): the snapshots and checkpoints from here cover `strategy`, and checkpoints record
  // `config_text` (the config with the new choice), so a resume rebuilds what runs now. A
  // checkpoint end_step just wrote at `steps_done` is written again (collective): a resume
  // from it continues on the new choice, as the run does.
  void replace_strategy(sync::Strategy& strategy, const std::string& config_text,
                        int64_t steps_done);
  float lr_scale() const { return float(pos_.lr_scale); }
  void begin_step(int64_t step);
  // This rank's loss for its batch. Non-finite: remembered for end_step (the step still runs,
  // so the ranks stay in lockstep).
  void check_loss(double loss_sum, int64_t step);
  // During backward, before the strategy sees the range: with loss scaling, notes non-finite
  // values (on the backend, without waiting) and unscales the range; else the NaN policy's
  // check (host memory only).
  void check_grads(const nn::ParamRange& range);
  // What the loss's gradient is multiplied by this step: the loss scale, 1 without scaling.
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  // The scaler (null without loss scaling).
  const optim::LossScaler* loss_scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  // With loss scaling, "loss_scale" (for the next step) and "overflow_skips" (steps skipped
  // so far) into a metrics.jsonl line.
  void add_loss_scale_figures(nlohmann::json& j) const;
  // After Strategy::end_step. kSkipped: a rank saw NaN/Inf under the skip policy, or the
  // loss-scaled gradients overflowed on a rank, and the step was rolled back; kStop: a stop signal
  // arrived, a checkpoint was written, leave the loop. Throws NumericError (step, rank, layer)
  // under the abort policy or after too many skips.
  Outcome end_step(int64_t steps_done);
  bool interrupted() const { return interrupted_; }
  bool writes_checkpoints() const { return opt_.checkpoints(); }
  const std::string& last_checkpoint() const { return last_checkpoint_; }

 private:
  std::string write_checkpoint(int64_t steps_done);
  std::string describe_bad(int64_t code) const;
  // The loss scaler's verdict on the step, agreed by every rank: rolls an overflowed step
  // back; then the scale moves and pos_ follows it. True when the step was skipped.
  bool scaler_step(bool overflow);
  // The resumed position's scaler state into scaler_ (InputError naming the checkpoint when
  // it and this run disagree on loss scaling).
  void restore_scaler(const std::string& dir);

  GuardOptions opt_;
  std::string config_text_;
  comm::Communicator& comm_;
  std::optional<WorkerParts> parts_;  // re-seated by replace_strategy
  TrainPosition pos_;
  StopSignalScope signals_;
  StepSnapshot snapshot_;
  Stopwatch since_checkpoint_;
  int64_t step_ = 0;
  int64_t bad_code_ = 0;  // (kind << 40) | ((rank + 1) << 20) | (layer + 1); 0 = all finite
  bool interrupted_ = false;
  bool previous_skip_loss_bad_ = false;  // the last step was skipped for a NaN/Inf loss
  std::string last_checkpoint_;
  int64_t written_step_ = -1;  // the step of the last checkpoint write (on every rank)
  std::vector<CheckpointFile> resumed_rank_files_;  // until restore_strategy()
  bool resumed_same_world_ = true;
  std::string resumed_dir_;
  std::optional<optim::LossScaler> scaler_;
  DeviceBuffer<float> overflow_;  // 1 float on the backend: this rank's step overflowed
  bool fault_injected_ = false;   // the gradient fault hook fired this step
};

// Test hook: while set, check_grads makes the first gradient of a step's first range +Inf on
// the ranks and steps (0-based) where the hook returns true, once per step, as an overflow of
// the scaled gradients would. nullptr clears it.
void set_gradient_fault_hook(std::function<bool(int rank, int64_t step)> hook);

}  // namespace loom::train
