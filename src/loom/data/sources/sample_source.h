// What the loader reads samples from: random access by index, decoded to normalised floats.
// The in-memory Dataset is one; shard files (memory mapped) are another. gather() is const and
// thread-safe, so background threads can decode several batches at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/data/sources/dataset.h"

namespace loom::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t count() const = 0;
  virtual std::vector<int64_t> sample_shape() const = 0;
  int64_t sample_numel() const;
  virtual int num_classes() const = 0;
  // 0: each sample has a class label (y of gather). Otherwise each has this many float targets
  // (regression), read by gather_targets, and gather's labels are 0.
  virtual int64_t target_numel() const { return 0; }
  // Class labels per sample: 1, or one per position of a sequence sample (token windows).
  virtual int64_t labels_per_sample() const { return 1; }
  // Writes samples idx[0..n) to x (n * sample_numel floats) and y (n * labels_per_sample
  // labels).
  virtual void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const = 0;
  // The samples of `epoch`: the loader calls this. A source whose samples move from epoch to
  // epoch (token windows at a per-epoch offset) overrides it; gather() is then its epoch 0.
  virtual void gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                               int32_t* y) const {
    gather(idx, n, x, y);
  }
  // The float targets of samples idx[0..n): n * target_numel values.
  virtual void gather_targets(const int64_t* idx, int64_t n, float* t) const;

  // Bytes one record occupies where it is stored (what a throttled disk would have to read).
  virtual int64_t stored_record_bytes() const { return 4 + sample_numel() * 4; }
  // Records come in chunks that are cheap to read together (0: no chunking); the loader's
  // bounded-memory shuffle permutes chunks and shuffles within a window of them.
  virtual int64_t chunk_records() const { return 0; }
  // Hints: records [first, last) will be read soon / not again for a while.
  virtual void will_need(int64_t first, int64_t last) const {}
  virtual void release(int64_t first, int64_t last) const {}
};

// A view of a Dataset that outlives it.
class DatasetSource final : public SampleSource {
 public:
  explicit DatasetSource(const Dataset& ds) : ds_(ds) {}
  int64_t count() const override { return ds_.count; }
  std::vector<int64_t> sample_shape() const override { return ds_.sample_shape; }
  int num_classes() const override { return ds_.num_classes; }
  int64_t target_numel() const override { return ds_.target_numel; }
  int64_t labels_per_sample() const override { return ds_.labels_per_sample; }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override;
  void gather_targets(const int64_t* idx, int64_t n, float* t) const override;

 private:
  const Dataset& ds_;
};

// Every record of a source in memory, in order (a test set, for evaluation).
Dataset materialise(const SampleSource& src, const std::string& name = "shards");

}  // namespace loom::data
