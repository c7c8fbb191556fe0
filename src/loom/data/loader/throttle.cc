#include "loom/data/loader/throttle.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::data {

ThrottledSource::ThrottledSource(std::shared_ptr<const SampleSource> inner, double mbps)
    : inner_(std::move(inner)), bytes_per_second_(mbps * 1e6) {
  if (!(mbps > 0)) throw ConfigError(fmt::format("data.throttle_mbps must be > 0, got {}", mbps));
}

void ThrottledSource::gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const {
  gather_in_epoch(0, idx, n, x, y);
}

void ThrottledSource::gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                                      int32_t* y) const {
  double done_at;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_seconds();
    disk_free_at_ =
        std::max(disk_free_at_, now) + double(n * stored_record_bytes()) / bytes_per_second_;
    done_at = disk_free_at_;
  }
  inner_->gather_in_epoch(epoch, idx, n, x, y);
  const double left = done_at - now_seconds();
  if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
}

}  // namespace loom::data
