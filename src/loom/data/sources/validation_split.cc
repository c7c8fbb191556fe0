#include "loom/data/sources/validation_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "loom/core/error.h"
#include "loom/core/rng.h"

namespace loom::data {

ValidationSplit split_for_validation(int64_t count, double fraction, uint64_t seed) {
  ValidationSplit s;
  const int64_t held = std::min<int64_t>(count, std::llround(fraction * double(count)));
  std::vector<int64_t> order(size_t(std::max<int64_t>(count, 0)));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (held > 0) {
    // Rank 0's key on every rank: all of them hold out the same records.
    Rng rng(seed, 0, RngPurpose::kValidation);
    // A partial Fisher-Yates: the first `held` positions are a uniform random subset.
    for (int64_t i = 0; i < held; ++i)
      std::swap(order[size_t(i)], order[size_t(i + int64_t(rng.below(uint64_t(count - i))))]);
  }
  s.validation.assign(order.begin(), order.begin() + held);
  s.train.assign(order.begin() + held, order.end());
  std::sort(s.validation.begin(), s.validation.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

SubsetSource::SubsetSource(std::shared_ptr<const SampleSource> base, std::vector<int64_t> ids)
    : base_(std::move(base)), ids_(std::move(ids)) {
  for (size_t i = 0; i < ids_.size(); ++i)
    LOOM_CHECK(ids_[i] >= 0 && ids_[i] < base_->count() && (i == 0 || ids_[i] > ids_[i - 1]),
               "subset record {} of {}", ids_[i], base_->count());
}

void SubsetSource::gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const {
  gather_in_epoch(0, idx, n, x, y);
}

void SubsetSource::gather_in_epoch(int64_t epoch, const int64_t* idx, int64_t n, float* x,
                                   int32_t* y) const {
  std::vector<int64_t> mapped(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) mapped[size_t(i)] = ids_[size_t(idx[i])];
  base_->gather_in_epoch(epoch, mapped.data(), n, x, y);
}

void SubsetSource::gather_targets(const int64_t* idx, int64_t n, float* t) const {
  std::vector<int64_t> mapped(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) mapped[size_t(i)] = ids_[size_t(idx[i])];
  base_->gather_targets(mapped.data(), n, t);
}

void SubsetSource::will_need(int64_t first, int64_t last) const {
  if (first < last) base_->will_need(ids_[size_t(first)], ids_[size_t(last - 1)] + 1);
}

void SubsetSource::release(int64_t first, int64_t last) const {
  if (first < last) base_->release(ids_[size_t(first)], ids_[size_t(last - 1)] + 1);
}

}  // namespace loom::data
