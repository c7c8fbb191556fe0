// A validation split held out of the training data (data.validation): which records of the
// training source are held out, a view of the rest for the loader, and the held-out records
// in memory for evaluation after each epoch. The split depends only on (seed, fraction, count),
// so every worker -- threads of one process or MPI ranks computing it on their own -- holds out
// the same records, and a resumed run (whose config comes from its checkpoint) the same ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"

namespace loom::data {

// data.validation: a fraction of the training data in [0, 1), or a shard file to validate on
// (plan/data_reader.h reads it).
struct ValidationChoice {
  double fraction = 0;  // 0 = none held out
  std::string shards;   // a shard file (data.validation = "path"); then fraction is 0
  std::string where = "data.validation";  // where it was set, for errors
  bool enabled() const { return fraction > 0 || !shards.empty(); }
};

struct ValidationSplit {
  std::vector<int64_t> train;       // record ids the loader trains on, ascending
  std::vector<int64_t> validation;  // record ids held out, ascending
};

// round(fraction * count) records held out, chosen by a Fisher-Yates permutation drawn from
// the stream (seed, RngPurpose::kValidation) -- a stream of its own, so the shuffle, the
// initialisation and dropout keep their bits. fraction 0: every record trains.
ValidationSplit split_for_validation(int64_t count, double fraction, uint64_t seed);

// The records `ids` (ascending) of `base`, renumbered 0..ids.size(). Chunks and page hints go
// to the base's records, so a sharded source keeps its locality.
class SubsetSource final : public SampleSource {
 public:
  SubsetSource(std::shared_ptr<const SampleSource> base, std::vector<int64_t> ids);
  int64_t count() const override { return int64_t(ids_.size()); }
  std::vector<int64_t> sample_shape() const override { return base_->sample_shape(); }
  int num_classes() const override { return base_->num_classes(); }
  int64_t target_numel() const override { return base_->target_numel(); }
  int64_t labels_per_sample() const override { return base_->labels_per_sample(); }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override;
  void gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                       int32_t* y) const override;
  void gather_targets(const int64_t* idx, int64_t n, float* t) const override;
  int64_t stored_record_bytes() const override { return base_->stored_record_bytes(); }
  int64_t chunk_records() const override { return 0; }
  void will_need(int64_t first, int64_t last) const override;
  void release(int64_t first, int64_t last) const override;
  const std::vector<int64_t>& ids() const { return ids_; }  // base record of each position

 private:
  std::shared_ptr<const SampleSource> base_;
  std::vector<int64_t> ids_;
};

}  // namespace loom::data
