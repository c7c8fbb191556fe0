// The data sets of a run, assembled before any worker starts: the validation split held out of
// the training source (or read from its own shard), and the checks that the model, its loss and
// the data fit together.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_spec.h"
#include "loom/train/run_settings.h"
#include "loom/train/token_run.h"

namespace loom::train {

// The training samples and the test set of a run, as the config (or TrainOptions' data in
// memory) gives them.
struct RunSets {
  std::shared_ptr<const data::SampleSource> train;
  std::unique_ptr<data::Dataset> train_set;  // IDX in memory: what `train` reads
  data::Dataset test;  // materialised for evaluation; empty with data in memory or no test stream
  std::optional<data::Normalisation> input_norm;  // IDX pixels: recorded in model.safetensors
  std::string train_name, test_name;              // what the messages call them
  bool has_test = false;
};

// Training samples come from TrainOptions::train_data, a token stream (windows), a shard file
// (memory mapped, for sets larger than memory) or the IDX files (in memory). ConfigError naming
// data.train_shards when shards come without a test set to evaluate on.
RunSets open_run_sets(const Settings& s, const data::PipelineConfig& pipeline,
                      const TrainOptions& options, const TokenRun& tokens);

// The validation split (data.validation), in memory for evaluation after each epoch.
struct HeldOut {
  std::optional<data::Dataset> set;  // none: no validation split
  uint64_t fingerprint = 0;          // TrainPosition::validation_split
  std::string describe;              // for the log: "10% held out" or the file
};

// data.validation: a fraction of the training source held out (`train` becomes the rest), or a
// shard file. ConfigError/InputError naming the key or the file when the split leaves too few
// samples to train on or to evaluate, or the file does not fit the training data. Before any
// worker starts, so a bad split never touches output.dir.
HeldOut hold_out_validation(const Settings& s, const data::PipelineConfig& pipeline, int workers,
                            std::shared_ptr<const data::SampleSource>& train,
                            const TokenRun& tokens);

// The model's outputs per sample: one per class, or one per float target (regression).
int output_size(const data::SampleSource& s);

// What a run's training data sizes without training (`loom advise --run`, `loom scale -w`,
// `loom bench calibrate`): one sample's shape, the model's outputs, the training samples, the
// bytes a sample takes in its store, and whether it is a token run. Opens the sources as
// the run would (token shards, shards or the IDX files), so a missing or bad file is the
// run's own InputError.
struct DataShape {
  nn::Shape sample;
  int outputs = 0;
  int64_t count = 0;
  int64_t record_bytes = 0;
  bool tokens = false;
  int64_t sample_numel() const {
    int64_t n = 1;
    for (int64_t v : sample) n *= v;
    return n;
  }
};
DataShape read_data_shape(const Settings& s, const data::PipelineConfig& pipeline);

// loss.type against what the data holds: cross-entropy needs class labels, mse float targets.
void check_loss_fits_data(const nn::LossOptions& loss, const data::SampleSource& s,
                          const std::string& data_name);

}  // namespace loom::train
