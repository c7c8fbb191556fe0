// What a finished run's config says about its model and data, read back from the run's
// config.toml or a checkpoint's copy of it: to rebuild the model from a checkpoint, evaluate it
// on the run's test set (train/trained_model.h) and resume it on another world size.
#pragma once

#include <cstdint>
#include <string>

#include "loom/data/loader/pipeline_config.h"
#include "loom/nn/graph/model_spec.h"

namespace loom::plan {

struct SavedRun {
  nn::ModelSpec model;
  nn::LossOptions loss;
  std::string data_dir;           // data.dir: the IDX directory (when no shards are named)
  data::PipelineConfig pipeline;  // data.train_shards, data.test_shards, data.context...
  int64_t batch = 0;              // per worker and micro-batch
  int64_t accumulate = 1;         // train.accumulate
};

// `text`: the config as the run wrote it; `where` names it in errors (ConfigError naming the
// key). Keys of another loom version are not refused here: only these are read.
SavedRun read_saved_run(const std::string& text, const std::string& where);
// A run's config.toml.
SavedRun read_saved_run_file(const std::string& path);

}  // namespace loom::plan
