// The metadata `loom train` adds to model.safetensors beside the model file's own
// (nn/io/model_file.h): the training steps, the input normalisation and the loss. Written by a run
// and by `loom export`, read back by every loader of a trained model (`loom eval`, `predict`,
// `export`, `sample`, Python's loom.load). A model file may come from anywhere, so the reader
// checks every key it knows for type, range and agreement with the others, and an error
// names the file and the key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/model.h"

namespace loom::train {

// The keys (the file format: docs/formats.md, "model.safetensors").
constexpr const char* kStepsKey = "steps";
constexpr const char* kMeanKey = "input_mean";
constexpr const char* kStddevKey = "input_stddev";
constexpr const char* kLossKey = "loss";

struct TrainedModelMetadata {
  int64_t steps = -1;  // -1: not recorded
  std::optional<data::Normalisation> input_normalisation;
  nn::LossKind loss = nn::LossKind::kCrossEntropy;  // files older than the key hold classifiers
};

// The metadata for these fields (trained_model.cc).
std::map<std::string, std::string> trained_model_metadata(
    int64_t steps, const std::optional<data::Normalisation>& input_normalisation,
    nn::LossKind loss = nn::LossKind::kCrossEntropy);

// Reads them back (trained_model_metadata.cc, which the safetensors fuzz harness links) from
// `file`'s metadata. InputError naming file and key for: "steps" not an integer >= -1; "input_mean"
// or "input_stddev" without the other, not a number, not finite, stddev <= 0 or so small that the
// scale 1 / (255 stddev) overflows; "loss" not a known loss. Keys absent are the defaults above
// (files written before the key existed).
TrainedModelMetadata read_trained_model_metadata(const std::map<std::string, std::string>& meta,
                                                 const std::string& file);

}  // namespace loom::train
