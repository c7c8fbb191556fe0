// A trained run's model, loaded for use outside training (`loom eval`, `loom export`, and
// whatever else runs a finished model): the built nn::Model holding the trained parameters and
// state, the graph it was built from, what the run's config says of its model and data, and the
// data shape it takes.
//
//   Backend& be = cpu_backend();
//   TrainedModel m = load_trained_model("runs/mlp", be);   // or a checkpoint directory
//   const float* logits = m.model->forward(x, batch, nn::StepInfo{.training = false});
//
// The weights come from one of:
//   - a run's model.safetensors (nn/io/model_file.h), written at the end of every run; the model
//     is rebuilt from the graph in its metadata, so the file stands on its own, and the run's
//     config.toml beside it (if there) becomes `run`;
//   - a checkpoint directory (checkpoints/step-N, written by train.checkpoint_every,
//     train.checkpoint_minutes or a stop signal): train.ckpt's parameters, state and config,
//     the model rebuilt from that config.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"
#include "loom/plan/saved_run.h"
#include "loom/train/trained_model_metadata.h"

namespace loom::train {

struct TrainedModel {
  std::unique_ptr<nn::Model> model;  // on the backend given, trained parameters and state
  nn::GraphSpec graph;               // what `model` was built from
  // The run's config, as far as the model and its data go; nullopt: a model file with no
  // config.toml beside it.
  std::optional<plan::SavedRun> run;
  nn::Shape input_shape;  // per sample
  int num_classes = 0;
  std::string weights;  // the file the parameters came from (model.safetensors, train.ckpt)
  bool from_checkpoint = false;
  int64_t steps = -1;  // training steps behind the weights (-1: not recorded)
  // How the run normalised IDX pixels ((v/255 - mean)/stddev), when the file records it.
  std::optional<data::Normalisation> input_normalisation;
  // What it was trained to minimise: cross-entropy (a classifier) or mse (regression outputs).
  nn::LossKind loss = nn::LossKind::kCrossEntropy;
};

// `path`: a run directory holding model.safetensors, a model file itself (*.safetensors), a
// checkpoint directory (holding train.ckpt), or a run directory or checkpoints/ folder with no
// model.safetensors (its newest complete checkpoint). InputError naming the path when it is
// none of these, and naming the file and tensor when weights do not match the graph (a missing
// or extra tensor, another shape, a checkpoint of a model-parallel run).
TrainedModel load_trained_model(const std::string& path, Backend& backend);

}  // namespace loom::train
