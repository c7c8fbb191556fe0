#include "loom/data/loader/loader.h"

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
  if (opts_.workers < 1 || opts_.workers > 64)
    throw ConfigError(fmt::format("data.workers must be in [1, 64], got {}", opts_.workers));
  if (opts_.shuffle_window < 0)
    throw ConfigError(
        fmt::format("data.shuffle_window must be >= 0, got {}", opts_.shuffle_window));
  if (opts_.augment.crop_padding < 0)
    throw ConfigError(
        fmt::format("data.augment.crop_padding must be >= 0, got {}", opts_.augment.crop_padding));
  shape_ = source_->sample_shape();
  if (opts_.augment.enabled() && shape_.size() != 2 && shape_.size() != 3) {
    const bool crop = opts_.augment.crop_padding > 0;
    throw ConfigError(fmt::format(
        "{}key '{}' = {}: crop and flip need image samples {{C, H, W}}, these have {} dimensions",
        opts_.augment.where.empty() ? "" : opts_.augment.where + ": ",
        crop ? "data.augment.crop_padding" : "data.augment.hflip",
        crop ? std::to_string(opts_.augment.crop_padding) : "true", shape_.size()));
  }
  per_rank_ = opts_.global_batch / opts_.world;
  numel_ = source_->sample_numel();
  labels_ = source_->labels_per_sample();
  const int64_t n = source_->count();
  steps_ =
      opts_.drop_last ? n / opts_.global_batch : (n + opts_.global_batch - 1) / opts_.global_batch;
  // K queued batches plus the one the consumer holds; one slot when synchronous.
  slots_.resize(opts_.prefetch == 0 ? 1 : size_t(opts_.prefetch) + 1);
  for (Slot& s : slots_) {
    s.x.resize(size_t(per_rank_ * numel_));
    s.y.resize(size_t(per_rank_ * labels_));
    s.t.resize(size_t(per_rank_ * source_->target_numel()));
    s.idx.resize(size_t(per_rank_));
    if (opts_.augment.enabled()) s.scratch.resize(size_t(numel_));
  }
  order_.resize(size_t(n));
}

Loader::~Loader() {
  stop_workers();
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

void Loader::build_order(int64_t epoch) {
  const int64_t n = int64_t(order_.size());
  window_end_.clear();
  window_chunks_.clear();
  std::iota(order_.begin(), order_.end(), int64_t(0));
  if (!opts_.shuffle) return;
  // One stream keyed by (seed, epoch) with rank 0's key on every rank, so all ranks agree on
  // the order and take disjoint pieces of it.
  Rng rng(opts_.seed, 0, RngPurpose::kShuffle, uint64_t(epoch));
  auto shuffle = [&rng](int64_t* a, int64_t len) {  // Fisher-Yates
    for (int64_t i = len - 1; i > 0; --i) std::swap(a[i], a[rng.below(uint64_t(i) + 1)]);
  };
  if (opts_.shuffle_window == 0) {
    shuffle(order_.data(), n);
    return;
  }
  // Bounded-memory shuffle: a permutation of chunks, then a full shuffle inside each window of
  // consecutive (permuted) chunks, so only about one window of records is touched at a time.
  int64_t chunk = source_->chunk_records();
  if (chunk <= 0) chunk = std::max<int64_t>(1, opts_.shuffle_window / 16);
  const int64_t nchunks = (n + chunk - 1) / chunk;
  std::vector<int64_t> chunks(static_cast<size_t>(nchunks));
  std::iota(chunks.begin(), chunks.end(), int64_t(0));
  shuffle(chunks.data(), nchunks);
  const int64_t per_window = std::max<int64_t>(1, opts_.shuffle_window / chunk);
  int64_t pos = 0;
  for (int64_t w = 0; w < nchunks; w += per_window) {
    const int64_t start = pos;
    window_chunks_.emplace_back();
    for (int64_t k = w; k < std::min(nchunks, w + per_window); ++k) {
      const int64_t c = chunks[size_t(k)];
      window_chunks_.back().push_back(c);
      for (int64_t r = c * chunk; r < std::min(n, (c + 1) * chunk); ++r) order_[size_t(pos++)] = r;
    }
    shuffle(order_.data() + start, pos - start);
    window_end_.push_back(pos);
  }
}

void Loader::hint_windows(int64_t position) {
  if (window_end_.empty()) return;
  const int64_t chunk = std::max<int64_t>(1, source_->chunk_records());
  auto each_chunk = [&](size_t w, auto fn) {
    for (int64_t c : window_chunks_[w]) fn(c * chunk, std::min(source_->count(), (c + 1) * chunk));
  };
  // Windows two behind the current position are done with (one window of slack for batches
  // still being decoded by other threads): release their pages. Ask for the next one early.
  while (released_windows_ + 2 <= window_chunks_.size() &&
         window_end_[released_windows_ + 1] <= position) {
    each_chunk(released_windows_, [&](int64_t a, int64_t b) { source_->release(a, b); });
    ++released_windows_;
  }
  while (
      needed_windows_ < window_chunks_.size() &&
      (needed_windows_ == 0 || window_end_[needed_windows_ - 1] <= position + opts_.global_batch)) {
    each_chunk(needed_windows_, [&](int64_t a, int64_t b) { source_->will_need(a, b); });
    ++needed_windows_;
  }
}

void Loader::fill(int64_t step, Slot& slot) const {
  auto [begin, end] = rank_range(step);
  slot.size = end - begin;
  slot.offset = begin;
  slot.step = step;
  std::copy(order_.begin() + begin, order_.begin() + end, slot.idx.begin());
  source_->gather_in_epoch(epoch_, slot.idx.data(), slot.size, slot.x.data(), slot.y.data());
  if (!slot.t.empty()) source_->gather_targets(slot.idx.data(), slot.size, slot.t.data());
  if (opts_.augment.enabled())
    for (int64_t i = 0; i < slot.size; ++i)
      augment_sample(
          slot.x.data() + i * numel_, shape_, opts_.augment,
          derive_key(opts_.seed, uint64_t(epoch_), RngPurpose::kAugment, uint64_t(begin + i)),
          slot.scratch.data());
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void Loader::start_epoch(int64_t epoch) {
  stop_workers();
  if (!window_end_.empty() && released_windows_ < window_chunks_.size()) {
    // Pages of the previous epoch's last windows are not needed before the next pass.
    const int64_t chunk = std::max<int64_t>(1, source_->chunk_records());
    for (size_t w = released_windows_; w < window_chunks_.size(); ++w)
      for (int64_t c : window_chunks_[w])
        source_->release(c * chunk, std::min(source_->count(), (c + 1) * chunk));
  }
  epoch_ = epoch;
  build_order(epoch);
  released_windows_ = needed_windows_ = 0;
  started_ = true;
  for (Slot& s : slots_) s.state = SlotState::kFree;
  held_ = -1;
  next_claim_ = expected_ = 0;
  stop_ = false;
  error_ = nullptr;
  error_step_ = 0;
  epoch_wait_ = 0;
  epoch_batches_ = 0;
  if (opts_.prefetch > 0)
    for (int i = 0; i < opts_.workers; ++i) workers_.emplace_back([this] { work(); });
}

void Loader::work() {
  if (opts_.on_thread_start) opts_.on_thread_start();
  while (true) {
    int slot = -1;
    int64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto free_slot = [&] {
        for (size_t i = 0; i < slots_.size(); ++i)
          if (slots_[i].state == SlotState::kFree) return int(i);
        return -1;
      };
      cv_.wait(lock, [&] {
        return stop_ || error_ || next_claim_ >= steps_ || (slot = free_slot()) >= 0;
      });
      if (stop_ || error_ || next_claim_ >= steps_) return;
      // Claiming the step and the slot together keeps claims in step order, so the step the
      // consumer waits for always has a slot: no deadlock with K+1 slots and any worker count.
      step = next_claim_++;
      slots_[size_t(slot)].state = SlotState::kFilling;
      hint_windows(rank_range(step).first);
    }
    try {
      fill(step, slots_[size_t(slot)]);  // outside the lock: the consumer keeps running
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      // Batches before the failing step are still delivered; the consumer gets the error when
      // it asks for this step.
      if (!error_ || step < error_step_) {
        error_ = std::current_exception();
        error_step_ = step;
      }
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      slots_[size_t(slot)].state = SlotState::kReady;
    }
    cv_.notify_all();
  }
}

int Loader::fill_here(std::unique_lock<std::mutex>& lock) {
  int slot = -1;
  for (size_t i = 0; i < slots_.size() && slot < 0; ++i)
    if (slots_[i].state == SlotState::kFree) slot = int(i);
  if (slot < 0) return -1;
  const int64_t step = next_claim_++;
  slots_[size_t(slot)].state = SlotState::kFilling;
  hint_windows(rank_range(step).first);
  lock.unlock();
  try {
    fill(step, slots_[size_t(slot)]);
  } catch (...) {
    lock.lock();
    if (!error_ || step < error_step_) {
      error_ = std::current_exception();
      error_step_ = step;
    }
    cv_.notify_all();
    throw;
  }
  lock.lock();
  return slot;
}

bool Loader::next(Batch& out) {
  if (!started_) start_epoch(0);
  Stopwatch wait;
  int slot = -1;
  if (opts_.prefetch == 0) {
    if (expected_ >= steps_) return false;
    hint_windows(rank_range(expected_).first);
    slot = 0;
    fill(expected_++, slots_[0]);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    if (held_ >= 0) {
      slots_[size_t(held_)].state = SlotState::kFree;
      held_ = -1;
      cv_.notify_all();
    }
    if (expected_ >= steps_) return false;
    auto ready = [&] {
      for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].state == SlotState::kReady && slots_[i].step == expected_) return int(i);
      return -1;
    };
    slot = ready();
    if (slot < 0 && next_claim_ == expected_ && !error_) slot = fill_here(lock);
    if (slot < 0)
      cv_.wait(lock, [&] { return (slot = ready()) >= 0 || (error_ && expected_ >= error_step_); });
    if (slot < 0) std::rethrow_exception(error_);
    slots_[size_t(slot)].state = SlotState::kHeld;
    held_ = slot;
    ++expected_;
  }
  const Slot& s = slots_[size_t(slot)];
  out.x = s.x.data();
  out.y = s.y.data();
  out.labels_per_sample = labels_;
  out.t = s.t.empty() ? nullptr : s.t.data();
  out.size = s.size;
  out.global_offset = s.offset;
  out.step = s.step;
  out.wait_seconds = wait.seconds();
  epoch_wait_ += out.wait_seconds;
  ++epoch_batches_;
  return true;
}

}  // namespace loom::data
