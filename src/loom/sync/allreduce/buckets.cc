#include "loom/sync/allreduce/buckets.h"

#include <algorithm>

#include "loom/core/error.h"

namespace loom::sync {

std::vector<Bucket> plan_buckets(const std::vector<nn::ParamRange>& ranges, int64_t max_bytes) {
  std::vector<Bucket> buckets;
  Bucket cur;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    if (cur.ranges > 0 && max_bytes > 0 && (cur.count + it->count) * 4 > max_bytes) {
      buckets.push_back(cur);
      cur = Bucket{};
    }
    // Ranges are adjacent in the flat buffer, so walking backwards extends the bucket down.
    cur.offset = it->offset;
    cur.count += it->count;
    cur.ranges += 1;
  }
  if (cur.ranges > 0) buckets.push_back(cur);
  return buckets;
}

std::vector<compress::MatrixDims> bucket_matrices(const nn::Model& model, const Bucket& bucket) {
  std::vector<compress::MatrixDims> out;
  int64_t covered = 0;
  for (const auto& r : model.param_ranges()) {  // model order = increasing offsets
    if (r.offset < bucket.offset || r.offset >= bucket.offset + bucket.count) continue;
    int64_t sum = 0;
    for (const auto& [rows, cols] : model.layers()[size_t(r.layer)]->param_matrices()) {
      out.push_back({size_t(rows), size_t(cols)});
      sum += rows * cols;
    }
    LOOM_CHECK_EQ(sum, r.count);
    covered += r.count;
  }
  LOOM_CHECK_EQ(covered, bucket.count);
  return out;
}

BucketTracker::BucketTracker(const std::vector<nn::ParamRange>& ranges,
                             const std::vector<Bucket>& buckets) {
  for (const auto& r : ranges) {
    range_offsets_.push_back(r.offset);
    int found = -1;
    for (size_t b = 0; b < buckets.size(); ++b)
      if (r.offset >= buckets[b].offset && r.offset < buckets[b].offset + buckets[b].count)
        found = int(b);
    LOOM_CHECK(found >= 0, "range at offset {} in no bucket", r.offset);
    bucket_of_range_.push_back(found);
  }
  for (const auto& b : buckets) remaining_template_.push_back(b.ranges);
  reset();
}

void BucketTracker::reset() {
  remaining_ = remaining_template_;
}

int BucketTracker::ready(const nn::ParamRange& range) {
  auto it = std::lower_bound(range_offsets_.begin(), range_offsets_.end(), range.offset);
  LOOM_CHECK(it != range_offsets_.end() && *it == range.offset);
  const int b = bucket_of_range_[size_t(it - range_offsets_.begin())];
  LOOM_CHECK_GT(remaining_[b], 0);
  return --remaining_[b] == 0 ? b : -1;
}

}  // namespace loom::sync
