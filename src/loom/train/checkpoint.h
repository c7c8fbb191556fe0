// Checkpoints of a training run (docs/checkpoint.md): what a worker's state is made of, how all
// ranks write one together, and how a resumed run finds and loads the newest complete one.
//
// Layout under <output.dir>/checkpoints/:
//   step-000000000120/            a complete checkpoint (published by one atomic rename)
//     train.ckpt                  rank 0: parameters, position, seed, config text
//     rank-00000.ckpt ...         every rank: optimizer state and steps, strategy state
//   step-000000000150.partial/    being written, or left by a crash: never loaded
// Every file is written atomically (checkpoint_format.h); once all ranks report their files
// written (a collective), rank 0 renames the .partial directory and fsyncs its parent, so a
// step-N directory is complete by construction. Ranks of a multi-machine run need a shared
// file system for this directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/nn/graph/model.h"
#include "loom/optim/optimizer.h"
#include "loom/sync/strategy.h"
#include "loom/train/checkpoint_format.h"

namespace loom::train {

// The weights of the epoch with the best validation figure so far (train.keep_best), rank 0's,
// in host memory. epoch 0: none yet.
struct BestWeights {
  int64_t epoch = 0;
  double val_acc = -1, val_loss = 0;
  std::vector<float> params;
  std::vector<float> state;  // Model::state() (BatchNorm running statistics)
};

// The parts of one worker that a checkpoint covers.
struct WorkerParts {
  Backend& backend;
  nn::Model& model;
  optim::Optimizer& optimizer;
  sync::Strategy& strategy;
  // train.keep_best: saved in train.ckpt and restored on resume, so a resumed run keeps the
  // best epoch trained before its checkpoint. nullptr: not kept.
  BestWeights* best;
};

// Where the run is: everything besides the parts that the next steps depend on.
struct TrainPosition {
  int64_t step = 0;             // global steps completed
  int64_t steps_per_epoch = 0;  // epoch = step / steps_per_epoch, the loader's step = step % it
  int64_t world = 1;
  // Samples per step over all ranks (batch x train.accumulate x world). A resume on another
  // world size keeps it (0: not recorded, a checkpoint of an older loom).
  int64_t global_batch = 0;
  int64_t accumulate = 1;  // train.accumulate: micro-batches per step
  uint64_t seed = 0;       // every random stream derives from (seed, rank, purpose, step)
  double lr_scale = 1.0;   // lowered by skipped NaN steps (train.nan_policy = "skip")
  int64_t nan_skips = 0;   // consecutive skipped steps so far
  // Dynamic loss scaling (optim/loss_scaler.h): the scale for the next step, its clean steps
  // in a row and the steps skipped for overflow so far. loss_scale 0: the run does not scale.
  double loss_scale = 0;
  int64_t loss_scale_streak = 0, overflow_skips = 0;
  // FNV-1a 64 of the training records data.validation holds out (0: none). A resume must
  // train on the same records, so a checkpoint of another split is refused.
  uint64_t validation_split = 0;
  // Vocabulary::fingerprint() of a run on token windows (0: not tokens). Another vocabulary
  // gives the same ids other meanings, so a checkpoint of another one is refused.
  uint64_t vocabulary = 0;
  int64_t epoch() const { return steps_per_epoch ? step / steps_per_epoch : 0; }
  int64_t step_in_epoch() const { return steps_per_epoch ? step % steps_per_epoch : 0; }
};

// train.ckpt's sections naming the model's per-sample input shape and classes, so a
// checkpoint can be loaded as a model without its data (trained_model.h).
inline constexpr const char* kCheckpointInputShape = "model.input_shape";
inline constexpr const char* kCheckpointNumClasses = "model.num_classes";

// train.ckpt and rank-R.ckpt of one worker's state.
CheckpointFile make_train_file(WorkerParts& w, const TrainPosition& pos, const std::string& config);
CheckpointFile make_rank_file(WorkerParts& w, const TrainPosition& pos, int rank);
// Restores parameters (train file) and optimizer state (rank files) after checking that they
// belong to a run like this one; returns the position. `ranks`: this rank's own file when the
// checkpoint's world size is this run's, else every rank file of the checkpoint, in rank order,
// from which this rank's state is resharded (docs/checkpoint.md, "Another world size"). The
// strategy is restored separately (restore_strategy, after Strategy::start()).
TrainPosition restore_parts(WorkerParts& w, const CheckpointFile& train,
                            const std::vector<CheckpointFile>& ranks, const TrainPosition& expect,
                            int rank_index);
// The strategy's sections of `ranks` (as for restore_parts). Returns what a resume on another
// world size could not carry over exactly ("" when it could, or the world is the same).
std::string restore_strategy(WorkerParts& w, const std::vector<CheckpointFile>& ranks,
                             bool same_world);

// What a resume needs to know before it builds the run: the checkpoint's world size and global
// batch (from its config text where an older loom did not record it; 0 when that does not read
// back either).
struct CheckpointShape {
  int64_t world = 1;
  int64_t global_batch = 0;
  int64_t accumulate = 1;
};
CheckpointShape checkpoint_shape(const std::string& checkpoint_dir);

// In-memory copy of everything a step changes, for rolling a skipped step back.
class StepSnapshot {
 public:
  void capture(WorkerParts& w);
  void restore(WorkerParts& w) const;

 private:
  std::vector<float> params_;
  std::vector<float> model_state_;  // BatchNorm running statistics
  std::vector<std::vector<float>> optim_;
  int64_t optim_steps_ = 0;
  sync::StrategyState strategy_;
};

std::string checkpoint_name(int64_t step);  // "step-000000000120"

// Collective (every rank at the same step): writes this rank's files and, on rank 0, publishes
// the checkpoint and deletes all but the newest `keep`. Returns the published directory, or ""
// when some rank failed to write (disk full, ...): the previous checkpoints are intact and every
// rank logs why. Never throws for I/O failures; communication failures propagate.
std::string save_checkpoint(comm::Communicator& c, const std::string& root, int keep,
                            WorkerParts& w, const TrainPosition& pos, const std::string& config);

// The newest complete checkpoint reachable from `path`: a run's output directory (holding
// checkpoints/), a checkpoints directory, or one step-N directory. Checkpoints whose files do
// not parse are skipped with a warning. InputError naming `path` if there is none.
std::string find_latest_checkpoint(const std::string& path);
// The config text saved in a checkpoint directory (for `loom train --resume DIR` without a
// config file).
std::string checkpoint_config_text(const std::string& checkpoint_dir);

// Collective: rank 0 finds the newest checkpoint under `path`, every rank loads it (parameters,
// optimizer, position); the strategy follows with restore_strategy after start().
struct LoadedCheckpoint {
  std::string dir;
  TrainPosition pos;
  // This rank's file, or with another world size every rank's (restore_parts).
  std::vector<CheckpointFile> rank_files;
  bool same_world = true;
};
LoadedCheckpoint load_checkpoint(comm::Communicator& c, const std::string& path, WorkerParts& w,
                                 const TrainPosition& expect);

}  // namespace loom::train
