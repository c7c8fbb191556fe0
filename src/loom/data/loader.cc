#include "loom/data/loader.h"

#include <algorithm>
#include <numeric>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/core/timer.h"

namespace loom::data {
Loader::Loader(const Dataset& data, LoaderOptions opts)
    : Loader(std::make_shared<DatasetSource>(data), opts) {}

Loader::Loader(std::shared_ptr<const SampleSource> source, LoaderOptions opts)
    : source_(std::move(source)), opts_(opts) {
  if (opts_.world < 1)
    throw ConfigError(fmt::format("loader: world size must be >= 1, got {}", opts_.world));
  if (opts_.rank < 0 || opts_.rank >= opts_.world)
    throw ConfigError(fmt::format("loader: rank {} is outside [0, {})", opts_.rank, opts_.world));
  if (opts_.global_batch < 1)
    throw ConfigError(
        fmt::format("data.batch: the global batch must be >= 1, got {}", opts_.global_batch));
  if (opts_.global_batch % opts_.world != 0)
    throw ConfigError(fmt::format(
        "data.batch: the global batch {} is not divisible by the world size {}; choose a multiple",
        opts_.global_batch, opts_.world));
  if (opts_.prefetch < 0)
    throw ConfigError(fmt::format("data.prefetch must be >= 0, got {}", opts_.prefetch));
  per_rank_ = opts_.global_batch / opts_.world;
  numel_ = source_->sample_numel();
  const int64_t n = source_->count();
  steps_ =
      opts_.drop_last ? n / opts_.global_batch : (n + opts_.global_batch - 1) / opts_.global_batch;
  // K queued batches plus the one the consumer holds; one slot when synchronous.
  slots_.resize(opts_.prefetch == 0 ? 1 : size_t(opts_.prefetch) + 1);
  for (Slot& s : slots_) {
    s.x.resize(size_t(per_rank_ * numel_));
    s.y.resize(size_t(per_rank_));
    s.idx.resize(size_t(per_rank_));
  }
  ready_.reserve(slots_.size());
  free_.reserve(slots_.size());
  order_.resize(size_t(n));
}

Loader::~Loader() {
  stop_producer();
}

int64_t Loader::steps_per_epoch() const {
  return steps_;
}

std::pair<int64_t, int64_t> Loader::rank_range(int64_t step) const {
  const int64_t gb = opts_.global_batch, base = step * gb;
  const int64_t in_batch = std::min(gb, source_->count() - base);
  if (in_batch == gb) return {base + opts_.rank * per_rank_, base + (opts_.rank + 1) * per_rank_};
  // The last partial batch (drop_last = false): ceil-sized contiguous pieces, in rank order.
  const int64_t piece = (in_batch + opts_.world - 1) / opts_.world;
  return {base + std::min(in_batch, opts_.rank * piece),
          base + std::min(in_batch, (opts_.rank + 1) * piece)};
}

void Loader::fill(int64_t step, Slot& slot) const {
  auto [begin, end] = rank_range(step);
  slot.size = end - begin;
  slot.offset = begin;
  slot.step = step;
  std::copy(order_.begin() + begin, order_.begin() + end, slot.idx.begin());
  source_->gather(slot.idx.data(), slot.size, slot.x.data(), slot.y.data());
}

void Loader::stop_producer() {
  if (producer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    producer_.join();
  }
}

void Loader::start_epoch(int64_t epoch) {
  stop_producer();
  std::iota(order_.begin(), order_.end(), int64_t(0));
  if (opts_.shuffle) {
    // Fisher-Yates with a stream keyed by (seed, epoch); rank 0's key on every rank so all
    // ranks agree on the permutation and take disjoint pieces of it.
    Rng rng(opts_.seed, 0, RngPurpose::kShuffle, uint64_t(epoch));
    for (int64_t i = int64_t(order_.size()) - 1; i > 0; --i)
      std::swap(order_[size_t(i)], order_[rng.below(uint64_t(i) + 1)]);
  }
  started_ = true;
  next_step_ = 0;
  ready_.clear();
  free_.clear();
  for (int i = 0; i < int(slots_.size()); ++i) free_.push_back(i);
  held_ = -1;
  stop_ = false;
  done_ = false;
  error_ = nullptr;
  if (opts_.prefetch > 0) producer_ = std::thread([this] { produce(); });
}

void Loader::produce() {
  try {
    for (int64_t step = 0; step < steps_; ++step) {
      int slot;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
        if (stop_) return;
        slot = free_.front();
        free_.erase(free_.begin());
      }
      fill(step, slots_[size_t(slot)]);  // outside the lock: the consumer keeps running
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.push_back(slot);
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

bool Loader::next(Batch& out) {
  if (!started_) start_epoch(0);
  Stopwatch wait;
  int slot;
  if (opts_.prefetch == 0) {
    if (next_step_ >= steps_) return false;
    slot = 0;
    fill(next_step_++, slots_[0]);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    if (held_ >= 0) {
      free_.push_back(held_);
      held_ = -1;
      cv_.notify_all();
    }
    cv_.wait(lock, [&] { return !ready_.empty() || done_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    slot = ready_.front();
    ready_.erase(ready_.begin());
    held_ = slot;
  }
  const Slot& s = slots_[size_t(slot)];
  out.x = s.x.data();
  out.y = s.y.data();
  out.size = s.size;
  out.global_offset = s.offset;
  out.step = s.step;
  out.wait_seconds = wait.seconds();
  return true;
}

}  // namespace loom::data
