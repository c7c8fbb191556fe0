#include "loom/data/loader/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "loom/core/error.h"

namespace loom::data {
namespace {

// n samples of 3 floats; sample i holds {i, i + 0.5, -i}, label i % 7, so a batch names its
// samples.
Dataset synthetic(int64_t n) {
  Dataset d;
  d.name = "synthetic";
  d.count = n;
  d.sample_shape = {3};
  d.num_classes = 7;
  for (int64_t i = 0; i < n; ++i) {
    d.features.insert(d.features.end(), {float(i), float(i) + 0.5f, -float(i)});
    d.labels.push_back(int32_t(i % 7));
  }
  return d;
}

struct Seen {
  std::vector<int64_t> ids;  // sample ids in batch order
  std::vector<int64_t> offsets, sizes;
};

Seen run_epoch(Loader& l, int64_t epoch) {
  Seen s;
  l.start_epoch(epoch);
  Batch b;
  int64_t step = 0;
  while (l.next(b)) {
    EXPECT_EQ(b.step, step++);
    s.offsets.push_back(b.global_offset);
    s.sizes.push_back(b.size);
    for (int64_t i = 0; i < b.size; ++i) {
      int64_t id = int64_t(b.x[i * 3]);
      EXPECT_EQ(b.x[i * 3 + 1], float(id) + 0.5f);
      EXPECT_EQ(b.x[i * 3 + 2], -float(id));
      EXPECT_EQ(b.y[i], id % 7);
      s.ids.push_back(id);
    }
  }
  EXPECT_EQ(step, l.steps_per_epoch());
  return s;
}

TEST(Loader, OneRankSeesAPermutationOncePerEpoch) {
  Dataset d = synthetic(100);
  Loader l(d, {.global_batch = 10, .seed = 5});
  EXPECT_EQ(l.steps_per_epoch(), 10);
  Seen e0 = run_epoch(l, 0);
  ASSERT_EQ(e0.ids.size(), 100u);
  std::vector<int64_t> sorted = e0.ids;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[size_t(i)], i);
  std::vector<int64_t> identity(100);
  for (int64_t i = 0; i < 100; ++i) identity[size_t(i)] = i;
  EXPECT_NE(e0.ids, identity);  // shuffled
  Seen e1 = run_epoch(l, 1);
  EXPECT_NE(e0.ids, e1.ids);               // a new order each epoch
  EXPECT_EQ(run_epoch(l, 0).ids, e0.ids);  // and the same order for the same epoch
}

TEST(Loader, NoShuffleIsInOrder) {
  Dataset d = synthetic(25);
  Loader l(d, {.global_batch = 5, .shuffle = false, .prefetch = 0});
  Seen s = run_epoch(l, 3);
  for (int64_t i = 0; i < 25; ++i) EXPECT_EQ(s.ids[size_t(i)], i);
}

TEST(Loader, ShardsOfRanksPartitionEachGlobalBatch) {
  Dataset d = synthetic(103);
  for (int world : {1, 2, 4}) {
    Loader whole(d, {.global_batch = 12, .seed = 9});
    Seen ref = run_epoch(whole, 2);
    ASSERT_EQ(ref.ids.size(), 96u);  // 8 full global batches, 7 samples dropped
    std::vector<Seen> ranks;
    for (int r = 0; r < world; ++r) {
      Loader l(d, {.global_batch = 12, .rank = r, .world = world, .seed = 9});
      EXPECT_EQ(l.rank_batch(), 12 / world);
      ranks.push_back(run_epoch(l, 2));
    }
    const int64_t b = 12 / world;
    for (int64_t step = 0; step < 8; ++step) {
      // Concatenating the ranks' batches of a step gives the one-rank global batch.
      std::vector<int64_t> joined;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(ranks[size_t(r)].offsets[size_t(step)], step * 12 + r * b);
        EXPECT_EQ(ranks[size_t(r)].sizes[size_t(step)], b);
        auto& ids = ranks[size_t(r)].ids;
        joined.insert(joined.end(), ids.begin() + step * b, ids.begin() + (step + 1) * b);
      }
      EXPECT_EQ(joined, std::vector<int64_t>(ref.ids.begin() + step * 12,
                                             ref.ids.begin() + (step + 1) * 12))
          << "world " << world << " step " << step;
    }
  }
}

TEST(Loader, KeepLastSplitsThePartialBatch) {
  Dataset d = synthetic(10);
  std::set<int64_t> all;
  for (int r = 0; r < 2; ++r) {
    Loader l(d, {.global_batch = 4, .rank = r, .world = 2, .drop_last = false});
    EXPECT_EQ(l.steps_per_epoch(), 3);
    Seen s = run_epoch(l, 0);
    EXPECT_EQ(s.sizes, (std::vector<int64_t>{2, 2, 1}));
    EXPECT_EQ(s.offsets.back(), 8 + r);
    all.insert(s.ids.begin(), s.ids.end());
  }
  EXPECT_EQ(all.size(), 10u);
}

TEST(Loader, SameSeedSameBatchesWhateverK) {
  Dataset d = synthetic(500);
  Loader sync(d, {.global_batch = 32, .seed = 77, .prefetch = 0});
  Loader ahead(d, {.global_batch = 32, .seed = 77, .prefetch = 4});
  Loader other(d, {.global_batch = 32, .seed = 78, .prefetch = 4});
  for (int epoch = 0; epoch < 3; ++epoch) {
    Seen a = run_epoch(sync, epoch), b = run_epoch(ahead, epoch);
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_NE(a.ids, run_epoch(other, epoch).ids);
  }
}

// Counts the gathers run on the consumer's thread and on any other (a loader thread).
class CountingSource final : public SampleSource {
 public:
  CountingSource(const Dataset& d, std::thread::id consumer) : inner_(d), consumer_(consumer) {}
  int64_t count() const override { return inner_.count(); }
  std::vector<int64_t> sample_shape() const override { return inner_.sample_shape(); }
  int num_classes() const override { return inner_.num_classes(); }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override {
    ++(std::this_thread::get_id() == consumer_ ? by_consumer : by_loader);
    inner_.gather(idx, n, x, y);
  }
  mutable std::atomic<int> by_consumer{0}, by_loader{0};

 private:
  DatasetSource inner_;
  std::thread::id consumer_;
};

// Holds the loader threads in LoaderOptions::on_thread_start until open(): loader threads the
// scheduler has not run yet. A loader that waits for them instead of filling the batch itself
// would hang; after a generous delay a guard thread opens the gate, so such a loader fails the
// counts below instead of hanging the test (the delay is never reached when the loader is right,
// and nothing is measured against it).
class ThreadStartGate {
 public:
  ThreadStartGate()
      : guard_([this] {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, std::chrono::seconds(60), [this] { return open_; });
          open_ = true;
          cv_.notify_all();
        }) {}
  ~ThreadStartGate() {
    open();
    guard_.join();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::thread guard_;
};

// Two loader threads, K = 2, whose start waits for `gate`.
LoaderOptions held_threads(ThreadStartGate& gate) {
  LoaderOptions o;
  o.global_batch = 32;
  o.seed = 5;
  o.prefetch = 2;
  o.workers = 2;
  o.on_thread_start = [&gate] { gate.wait(); };
  return o;
}

TEST(Loader, ConsumerFillsABatchNoLoaderThreadHasStarted) {
  Dataset d = synthetic(320);
  Loader sync(d, {.global_batch = 32, .seed = 5, .prefetch = 0});
  const Seen want = run_epoch(sync, 0);
  // 10 batches, and the loader threads never get past their start: the consumer fills every
  // batch itself instead of waiting for them.
  auto source = std::make_shared<CountingSource>(d, std::this_thread::get_id());
  ThreadStartGate gate;
  const LoaderOptions o = held_threads(gate);
  {
    Loader held(source, o);
    const Seen a = run_epoch(held, 0);
    gate.open();                 // before ~Loader joins the threads
    EXPECT_EQ(a.ids, want.ids);  // the same batches whoever filled them
  }
  EXPECT_EQ(source->by_consumer.load(), 10);
  EXPECT_EQ(source->by_loader.load(), 0);
}

TEST(Loader, LoaderThreadsThatStartMidEpochTakeOverWithoutGapsOrRepeats) {
  Dataset d = synthetic(320);
  Loader sync(d, {.global_batch = 32, .seed = 5, .prefetch = 0});
  const Seen want = run_epoch(sync, 0);
  auto source = std::make_shared<CountingSource>(d, std::this_thread::get_id());
  ThreadStartGate gate;
  const LoaderOptions o = held_threads(gate);
  Loader l(source, o);
  l.start_epoch(0);
  Batch b;
  std::vector<int64_t> ids;
  auto take = [&] {
    EXPECT_EQ(b.step, int64_t(ids.size()) / 32);
    for (int64_t i = 0; i < b.size; ++i) ids.push_back(int64_t(b.x[i * 3]));
  };
  for (int k = 0; k < 3 && l.next(b); ++k) take();  // no ASSERT: the gate must open below
  EXPECT_EQ(ids.size(), 96u);
  EXPECT_EQ(source->by_consumer.load(), 3);  // the threads are held: the consumer filled these
  EXPECT_EQ(source->by_loader.load(), 0);
  gate.open();  // now the threads claim steps too; who fills which one is the scheduler's call
  while (l.next(b)) take();
  EXPECT_EQ(ids, want.ids);
  // Each batch filled exactly once.
  EXPECT_EQ(source->by_consumer.load() + source->by_loader.load(), 10);
}

TEST(Loader, BuffersAreReusedAcrossSteps) {
  Dataset d = synthetic(64);
  Loader l(d, {.global_batch = 8, .prefetch = 2});
  std::set<const float*> buffers;
  for (int epoch = 0; epoch < 3; ++epoch) {
    l.start_epoch(epoch);
    Batch b;
    while (l.next(b)) buffers.insert(b.x);
  }
  EXPECT_LE(buffers.size(), 3u);  // K + 1 slots, never a fresh allocation
}

TEST(Loader, AbandonedEpochAndDestructionAreClean) {
  Dataset d = synthetic(1000);
  Loader l(d, {.global_batch = 10, .prefetch = 3});
  l.start_epoch(0);
  Batch b;
  ASSERT_TRUE(l.next(b));
  l.start_epoch(1);  // the producer of epoch 0 is stopped mid-way
  ASSERT_TRUE(l.next(b));
  EXPECT_EQ(b.step, 0);
  // Epoch 1's first batch, not one left over from epoch 0, and epoch 0's counts are gone.
  Loader fresh(d, {.global_batch = 10, .prefetch = 0});
  fresh.start_epoch(1);
  Batch want;
  ASSERT_TRUE(fresh.next(want));
  EXPECT_EQ(b.global_offset, want.global_offset);
  EXPECT_EQ(std::vector<float>(b.x, b.x + 30), std::vector<float>(want.x, want.x + 30));
  EXPECT_EQ(l.epoch_batches(), 1);
  EXPECT_EQ(l.epoch_wait_seconds(), b.wait_seconds);
}  // the destructor joins a producer blocked on a full queue

TEST(Loader, BadOptionsAreConfigErrors) {
  Dataset d = synthetic(10);
  EXPECT_THROW(Loader(d, {.global_batch = 10, .rank = 0, .world = 3}), ConfigError);
  EXPECT_THROW(Loader(d, {.global_batch = 0}), ConfigError);
  EXPECT_THROW(Loader(d, {.global_batch = 4, .rank = 2, .world = 2}), ConfigError);
  EXPECT_THROW(Loader(d, {.global_batch = 4, .prefetch = -1}), ConfigError);
  try {
    Loader(d, {.global_batch = 10, .rank = 0, .world = 3});
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("not divisible by the world size 3"));
  }
}

}  // namespace
}  // namespace loom::data
