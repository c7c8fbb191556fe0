// The training loop: every worker trains a replica on its shard of each global batch and a
// sync strategy makes the replicas agree. Workers are threads of this process (transport
// "thread") or MPI ranks (one per process).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"
#include "loom/plan/run_plan.h"

namespace loom::train {

struct TrainedModel;  // trained_model.h

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  int64_t steps = 0;
  double train_loss = 0, train_acc = 0;
  // On the validation split (data.validation) after the epoch; -1: not evaluated (no split,
  // or eval = false). The test set is never evaluated per epoch.
  double val_loss = -1, val_acc = -1;
  int64_t best_epoch = 0;  // train.keep_best: the best epoch so far, this one included (0: off)
  double seconds = 0;      // training loop wall time, evaluation excluded
  double samples_per_s = 0;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, loader_wait_s = 0;
  int64_t bytes_sent = 0;
  int64_t exchanges = 0;  // synchronisations this rank took part in (SyncStats::exchanges)
};

struct TrainResult {
  std::vector<EpochMetrics> epochs;  // those this process ran (a resumed run: from its epoch)
  int64_t epochs_done = 0;           // epochs reached over the whole run, resumes included
  // The final weights on the test set, evaluated once at the end; -1: not evaluated
  // (eval = false).
  double test_acc = -1, test_loss = -1;
  double val_acc = -1, val_loss = -1;  // the last epoch's validation figures (-1: none)
  int64_t val_samples = 0;             // records in the validation split (0: none)
  double train_loss = 0;               // the last epoch's
  double samples_per_s = 0;            // over all epochs' training loops
  int world = 1;
  int64_t steps = 0;
  std::string describe;             // model, optimizer, strategy
  std::vector<float> final_params;  // rank 0's parameters at the end
  std::vector<float> final_state;   // and its non-trained state (BatchNorm running statistics)
  // train.keep_best: the epoch with the highest validation accuracy (ties: the lower validation
  // loss, then the earlier epoch), resumes included, its figures, and rank 0's parameters and
  // Model::state() at its end. best_epoch 0: not kept (or no epoch finished).
  int64_t best_epoch = 0;
  double best_val_acc = -1, best_val_loss = -1;
  std::vector<float> best_params;
  std::vector<float> best_state;
  bool interrupted = false;  // stopped by SIGINT/SIGTERM (after writing a checkpoint)
  std::string checkpoint;    // the last checkpoint written ("" = none)
  std::string output_dir;    // where config.toml, metrics.jsonl, summary.json went
  std::string model_file;    // <output_dir>/model.safetensors ("" = not written)
  double wall_s = 0;         // the whole run, set-up and data loading included
  // TrainOptions::keep_results: every metrics.jsonl line as JSON text ("format_version"
  // included; step lines every train.log_every steps even when output.dir is ""), summary.json
  // as JSON text, and rank 0's final model on the CPU backend, as load_trained_model() loads
  // the model.safetensors the run writes (null for a model-parallel run: rank 0 holds slices).
  std::vector<std::string> metrics_lines;
  std::string summary_json;
  std::shared_ptr<TrainedModel> model;
  // codec/sync = "auto": the choice, its runner-up and predictions (JSON; "" = not auto).
  std::string auto_choice;
};

struct TrainOptions {
  // `loom train --force`: replace the results of an earlier run in output.dir (output_dir.h).
  bool force = false;
  // `loom train --print-model`: print the model's layers (names, shapes, parameters, FLOPs)
  // for the config's data, then stop without training.
  bool print_model = false;
  // Samples given in memory instead of read from data.dir or data.train_shards (the Python
  // package's loom.train): the training source, shared with the loader threads (gather() must
  // be thread-safe), and the test set (null: none; the run then has no test figures). The keys
  // that name data files (data.dir, data.train_shards, data.test_shards) are refused with
  // them. `data_name` names them in messages.
  std::shared_ptr<const data::SampleSource> train_data;
  std::shared_ptr<const data::Dataset> test_data;
  std::string data_name = "the arrays given";
  // Keep the metrics lines, the summary and the final model in TrainResult (for a caller in
  // this process that wants them without reading output.dir back).
  bool keep_results = false;
};

// Runs `loom train` for a run's plan (plan::read_run_plan reads it from a config). Throws
// loom::Error subclasses for bad config, bad data, lost peers and NaN loss. output.dir is
// touched only once every check passed (output_dir.h says what it may hold).
TrainResult run_training(const plan::RunPlan& run, const TrainOptions& options = {});

}  // namespace loom::train
