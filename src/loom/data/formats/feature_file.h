// Inputs to run a trained model on (`loom predict`): features without labels, from an IDX, NPY
// or CSV file, checked against the sample shape the model takes and normalised as its training
// data was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/data/formats/csv.h"
#include "loom/data/sources/dataset.h"

namespace loom::data {

struct FeatureArray {
  int64_t count = 0;
  std::vector<int64_t> sample_shape;  // the model's
  std::vector<float> values;          // count * numel(sample_shape)
};

// Reads `path` (format by content, as `loom data convert` detects it). Its records must hold
// as many values as `sample_shape` and, when they have more than one dimension, the same
// dimensions (a leading 1 of the model's shape may be missing: 28x28 images for a 1x28x28
// input). uint8 values (IDX, NPY) are normalised with `byte_norm`, the training data's
// (v/255 - mean)/stddev; without one they are refused, since the scale the model expects is
// unknown. Float values are taken as they are. CSV: every column is a feature. InputError
// naming the file and the problem otherwise (a shard, a folder, a shape the model doesn't take,
// a non-finite value).
FeatureArray read_features(const std::string& path, const std::vector<int64_t>& sample_shape,
                           const std::optional<Normalisation>& byte_norm, const CsvOptions& csv);

}  // namespace loom::data
