// A source that reads no faster than a given rate, emulating a hard disk (~120 MB/s) or an SSD
// in front of page-cached data (`data.throttle_mbps`). Reads are serialised through one virtual
// disk clock, as one spindle serves one request at a time.
#pragma once

#include <memory>
#include <mutex>

#include "loom/data/sources/sample_source.h"

namespace loom::data {

class ThrottledSource final : public SampleSource {
 public:
  // mbps: megabytes (1e6 bytes) per second, > 0.
  ThrottledSource(std::shared_ptr<const SampleSource> inner, double mbps);
  int64_t count() const override { return inner_->count(); }
  std::vector<int64_t> sample_shape() const override { return inner_->sample_shape(); }
  int num_classes() const override { return inner_->num_classes(); }
  int64_t labels_per_sample() const override { return inner_->labels_per_sample(); }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override;
  void gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                       int32_t* y) const override;
  int64_t stored_record_bytes() const override { return inner_->stored_record_bytes(); }
  int64_t chunk_records() const override { return inner_->chunk_records(); }
  void will_need(int64_t a, int64_t b) const override { inner_->will_need(a, b); }
  void release(int64_t a, int64_t b) const override { inner_->release(a, b); }

 private:
  std::shared_ptr<const SampleSource> inner_;
  double bytes_per_second_;
  mutable std::mutex mu_;
  mutable double disk_free_at_ = 0;  // when the virtual disk finishes its queued reads
};

}  // namespace loom::data
