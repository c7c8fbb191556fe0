// One rank's training run: set up its model, optimizer, strategy and loader, start (or resume
// from a checkpoint), run the epochs with their evaluation, checkpoints and metrics, and fill
// rank 0's result. run_training (trainer.h) assembles what it takes and runs it on every worker.
#pragma once

#include <cstdint>
#include <memory>

#include "loom/comm/communicator.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"
#include "loom/plan/run_plan.h"
#include "loom/train/run_writer.h"
#include "loom/train/token_run.h"
#include "loom/train/trainer.h"

namespace loom::train {

// `c`: this worker's communicator (the training ranks' own under ps.placement = "ranks").
// `validation`: null without a validation split; `validation_split` its fingerprint.
void train_worker(const plan::RunPlan& run, comm::Communicator& c,
                  std::shared_ptr<const data::SampleSource> train, const data::Dataset* validation,
                  uint64_t validation_split, const data::Dataset& test, TrainResult& result,
                  RunWriter& writer, const TrainOptions& options, const TokenRun& tokens);

}  // namespace loom::train
