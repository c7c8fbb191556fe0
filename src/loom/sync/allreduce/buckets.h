// Gradient buckets: contiguous spans of the flat gradient buffer, formed from the layers'
// parameter ranges in reverse layer order (the order backward produces them), each closed once
// it reaches the size limit (PyTorch DDP does the same, Li et al., VLDB 2020). A bucket is
// ready when the last of its ranges is.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/nn/graph/model.h"

namespace loom::sync {

struct Bucket {
  int64_t offset = 0;  // in floats, into the flat buffers
  int64_t count = 0;
  int ranges = 0;  // parameter ranges it holds
};

// Buckets in the order they become ready. max_bytes <= 0 puts everything in one bucket.
std::vector<Bucket> plan_buckets(const std::vector<nn::ParamRange>& ranges, int64_t max_bytes);

// The bucket's parameters as matrices end to end (each layer's Layer::param_matrices), for
// codecs that use the shape (PowerSGD).
std::vector<compress::MatrixDims> bucket_matrices(const nn::Model& model, const Bucket& bucket);

// Tracks readiness during one backward: ready(range) returns the index of the bucket that the
// range completes, or -1.
class BucketTracker {
 public:
  explicit BucketTracker(const std::vector<nn::ParamRange>& ranges,
                         const std::vector<Bucket>& buckets);
  void reset();
  int ready(const nn::ParamRange& range);

 private:
  std::vector<int> bucket_of_range_;  // by ParamRange index in model order
  std::vector<int64_t> range_offsets_;
  std::vector<int> remaining_template_, remaining_;
};

}  // namespace loom::sync
