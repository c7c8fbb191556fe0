// Evaluating a trained model (trained_model.h) on a labelled set: loss, accuracy and the
// confusion matrix. `loom eval` is this over the run's test set or another set.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/model.h"
#include "loom/train/forward_settings.h"
#include "loom/train/trained_model.h"

namespace loom::train {

struct EvalResult {
  int64_t count = 0;
  double loss = 0;      // mean softmax cross-entropy (no label smoothing), or mean squared error
  double accuracy = 0;  // argmax (the first of equal logits) equals the label; -1: regression
  bool regression = false;  // a model trained with loss.type = "mse": no accuracy, no confusion
  // Token windows: loss (nats) and accuracy are per token, over `tokens` positions of `count`
  // windows; token_unit names the unit of bits = loss / ln 2 ("byte", "character", "token").
  int64_t tokens = 0;
  std::string token_unit;
  int num_classes = 0;
  // confusion[t * num_classes + p]: samples of class t predicted as p.
  std::vector<int64_t> confusion;
};

// The set to evaluate `m` on, and a description of where it came from:
//   - data_path empty: the test set of the run's config, read as training reads it
//     (data.test_shards, or the t10k IDX files of data.dir normalised like the training set);
//   - a file: a shard file (`loom data convert`);
//   - a directory: its t10k IDX files, normalised as the run normalised its data.
// InputError when there is no config to name the test set, or the set's samples do not have
// the model's input shape or its labels exceed the model's classes.
data::Dataset load_eval_set(const TrainedModel& m, const std::string& data_path,
                            std::string* source);

// Forward in evaluation mode (dropout off, BatchNorm's running statistics) in chunks of
// `chunk` positions (forward_settings.h; token windows count each position), as `loom predict`
// runs its forward. The training loop's evaluation cuts each rank's share into even parts of at
// most that many, so at world size 1 it runs the same chunks when the set's size is at most
// kForwardPositions or a multiple of it.
EvalResult evaluate_model(nn::Model& model, const data::Dataset& set,
                          int64_t chunk = kForwardPositions);

// {"count", "loss", "accuracy", "num_classes", "confusion": [[...], ...], "per_class": [...]}
nlohmann::json eval_json(const EvalResult& r);

// A text table: loss, accuracy, then the confusion matrix with per-class recall.
std::string eval_text(const EvalResult& r);

}  // namespace loom::train
