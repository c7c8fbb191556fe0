// The loader: source -> this rank's shard of each global batch -> shuffle by (seed, epoch) ->
// gather/decode -> a bounded queue of K ready batches filled by a background thread
// (docs/architecture.md, "Loader"). It records how long the consumer waited for each batch.
//
// Determinism: the permutation depends only on (seed, epoch) and is the same on every rank; a
// batch's contents depend only on (seed, epoch, step, rank, world), never on K or on timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/data/loader/augment.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"

namespace loom::data {

struct LoaderOptions {
  int64_t global_batch = 128;  // samples per step over all ranks
  // This rank takes samples [rank*b, (rank+1)*b) of each global batch, b = global_batch/world
  // (global_batch % world == 0, else ConfigError).
  int rank = 0, world = 1;
  uint64_t seed = 0;
  bool shuffle = true;    // permutation by (seed, epoch) (RngPurpose::kShuffle), same on all ranks
  bool drop_last = true;  // drop the last partial global batch (every rank's shard the same size)
  int prefetch = 2;       // K ready batches on a background thread; 0 = synchronous
  // At their defaults, the options below keep the behaviour above.
  int workers = 1;  // background threads that gather/decode/augment batches (when prefetch > 0)
  // > 0: bounded-memory shuffle for sets larger than memory: permute the source's chunks, then
  // shuffle records within windows of about this many records (chunks taken in permuted order);
  // pages of finished windows are released. 0: a full permutation of all records.
  int64_t shuffle_window = 0;
  AugmentOptions augment{};  // off by default
  // Test hook: each loader thread calls it once, before it claims its first batch. A test
  // blocks in it to stand for a scheduler that has not given the loader threads a core yet.
  // Called concurrently from every loader thread; must return before the Loader is destroyed
  // or start_epoch() is called again (both join the threads).
  std::function<void()> on_thread_start = nullptr;
};

struct Batch {
  const float* x = nullptr;       // size * sample_numel floats, contiguous
  const int32_t* y = nullptr;     // size * labels_per_sample labels
  int64_t labels_per_sample = 1;  // SampleSource::labels_per_sample (a token window: its length)
  // Float targets (size * target_numel), when the source has them (regression); else null.
  const float* t = nullptr;
  int64_t size = 0;  // samples on this rank
  // Index within the epoch of this rank's first sample (step*global_batch + rank*b), so
  // per-sample randomness (dropout) is independent of the world size.
  int64_t global_offset = 0;
  int64_t step = 0;         // step within the epoch
  double wait_seconds = 0;  // how long next() waited for this batch
};

class Loader {
 public:
  // Over an in-memory Dataset that outlives the Loader.
  Loader(const Dataset& data, LoaderOptions opts);
  // Over any source (shards, ...); the loader shares its ownership.
  Loader(std::shared_ptr<const SampleSource> source, LoaderOptions opts);
  ~Loader();  // joins its threads
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  void start_epoch(int64_t epoch);
  // False at the end of the epoch; `out` stays valid until the next call.
  bool next(Batch& out);
  int64_t steps_per_epoch() const;
  int64_t rank_batch() const { return per_rank_; }  // b
  const LoaderOptions& options() const { return opts_; }
  const SampleSource& source() const { return *source_; }

  // This rank's [begin, end) within the epoch's sample order for `step` (exposed for tests).
  std::pair<int64_t, int64_t> rank_range(int64_t step) const;
  // The epoch's sample order (record ids by position), the same on every rank.
  const std::vector<int64_t>& order() const { return order_; }
  // Sum of Batch::wait_seconds since start_epoch, and the batches handed out.
  double epoch_wait_seconds() const { return epoch_wait_; }
  int64_t epoch_batches() const { return epoch_batches_; }

 private:
  enum class SlotState { kFree, kFilling, kReady, kHeld };
  struct Slot {
    std::vector<float> x;
    std::vector<int32_t> y;
    std::vector<float> t;
    std::vector<int64_t> idx;
    std::vector<float> scratch;  // augmentation
    int64_t size = 0, offset = 0, step = 0;
    SlotState state = SlotState::kFree;
  };
  void build_order(int64_t epoch);
  void fill(int64_t step, Slot& slot) const;
  void hint_windows(int64_t position);  // under mu_
  // The consumer's batch is not claimed by any loader thread (they had no core to run on:
  // every core is busy with a worker): claim it and fill it on the calling thread, with mu_
  // released meanwhile, instead of sleeping until a loader thread is scheduled. Returns the
  // slot, or -1 when none is free. Called under mu_ (`lock`).
  int fill_here(std::unique_lock<std::mutex>& lock);
  void work();
  void stop_workers();

  std::shared_ptr<const SampleSource> source_;
  LoaderOptions opts_;
  std::vector<int64_t> shape_;
  int64_t per_rank_ = 0, numel_ = 0, steps_ = 0, labels_ = 1;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;  // this epoch's sample order
  // Bounded-memory shuffle: window w covers positions [window_end_[w-1], window_end_[w]) and
  // reads the chunks window_chunks_[w].
  std::vector<int64_t> window_end_;
  std::vector<std::vector<int64_t>> window_chunks_;
  size_t released_windows_ = 0, needed_windows_ = 0;
  std::vector<Slot> slots_;
  bool started_ = false;
  double epoch_wait_ = 0;
  int64_t epoch_batches_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_claim_ = 0;  // next step a worker (or the synchronous path) fills
  int64_t expected_ = 0;    // next step the consumer takes
  int held_ = -1;
  bool stop_ = false;
  std::exception_ptr error_;
  int64_t error_step_ = 0;  // the step whose batch failed
  std::vector<std::thread> workers_;
};

}  // namespace loom::data
