// The loader's issue-5 paths: several decode workers, the bounded-memory shuffle, augmentation,
// throttling and errors raised on a background thread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/core/timer.h"
#include "loom/data/loader/augment.h"
#include "loom/data/loader/loader.h"
#include "loom/data/loader/throttle.h"

namespace loom::data {
namespace {

// Sample i is {i} (one float), label 0; chunked in `chunk` records when chunk > 0.
class IotaSource : public SampleSource {
 public:
  IotaSource(int64_t n, int64_t chunk, int64_t fail_at = -1)
      : n_(n), chunk_(chunk), fail_at_(fail_at) {}
  int64_t count() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {1}; }
  int num_classes() const override { return 1; }
  int64_t chunk_records() const override { return chunk_; }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override {
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] == fail_at_)
        throw InputError("iota: record " + std::to_string(idx[i]) + " is bad");
      x[i] = float(idx[i]);
      y[i] = 0;
    }
  }
  void release(int64_t a, int64_t b) const override { released_ += b - a; }
  mutable int64_t released_ = 0;

 private:
  int64_t n_, chunk_, fail_at_;
};

std::vector<int64_t> epoch_ids(Loader& l, int64_t epoch) {
  std::vector<int64_t> ids;
  l.start_epoch(epoch);
  Batch b;
  while (l.next(b))
    for (int64_t i = 0; i < b.size; ++i) ids.push_back(int64_t(b.x[i]));
  return ids;
}

TEST(LoaderExtra, ManyWorkersGiveTheSameBatchesInOrder) {
  auto src = std::make_shared<IotaSource>(2000, 0);
  Loader one(src, {.global_batch = 16, .seed = 3, .prefetch = 0});
  Loader many(src, {.global_batch = 16, .seed = 3, .prefetch = 4, .workers = 4});
  for (int e = 0; e < 3; ++e) EXPECT_EQ(epoch_ids(one, e), epoch_ids(many, e));
}

TEST(LoaderExtra, WindowShuffleIsAPermutationWithBoundedSpread) {
  auto src = std::make_shared<IotaSource>(1000, 10);  // 100 chunks of 10
  Loader l(src, {.global_batch = 20, .seed = 1, .prefetch = 2, .shuffle_window = 50});
  std::vector<int64_t> ids = epoch_ids(l, 0);
  ASSERT_EQ(ids.size(), 1000u);
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  // Each window of 50 positions holds exactly 5 whole chunks: the memory it touches is bounded.
  for (int w = 0; w < 20; ++w) {
    std::set<int64_t> chunks;
    for (int p = w * 50; p < (w + 1) * 50; ++p) chunks.insert(ids[size_t(p)] / 10);
    EXPECT_EQ(chunks.size(), 5u) << "window " << w;
  }
  // Shuffled within windows too (not chunk after chunk in order), and different per epoch.
  int in_order = 0;
  for (size_t p = 1; p < ids.size(); ++p) in_order += ids[p] == ids[p - 1] + 1;
  EXPECT_LT(in_order, 200);
  EXPECT_NE(ids, epoch_ids(l, 1));
  EXPECT_GE(src->released_, 800);  // finished windows were released
  // Same seed, K and workers do not change it.
  Loader k0(src, {.global_batch = 20, .seed = 1, .prefetch = 0, .shuffle_window = 50});
  EXPECT_EQ(epoch_ids(k0, 0), ids);
}

TEST(LoaderExtra, AugmentCropAndFlipHandComputed) {
  // A 1x3x3 image 1..9, padding 1. Find the draws the stream makes, then check the pixels.
  std::vector<int64_t> shape = {1, 3, 3};
  AugmentOptions o{.crop_padding = 1, .hflip = true, .pad_value = -5};
  for (uint64_t key = 0; key < 40; ++key) {
    Rng r(key);
    int64_t dy = int64_t(r.below(3)) - 1, dx = int64_t(r.below(3)) - 1;
    bool flip = r.next_u32() & 1u;
    float img[9], scratch[9];
    for (int i = 0; i < 9; ++i) img[i] = float(i + 1);
    augment_sample(img, shape, o, key, scratch);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        int64_t si = i + dy, sj = (flip ? 2 - j : j) + dx;
        float want = (si < 0 || si > 2 || sj < 0 || sj > 2) ? -5.0f : float(si * 3 + sj + 1);
        EXPECT_EQ(img[i * 3 + j], want) << "key " << key << " at " << i << "," << j;
      }
  }
}

TEST(LoaderExtra, AugmentationDoesNotDependOnWorldOrK) {
  Dataset d;
  d.count = 64;
  d.sample_shape = {1, 4, 4};
  d.num_classes = 1;
  for (int i = 0; i < 64 * 16; ++i) d.features.push_back(float(i));
  d.labels.assign(64, 0);
  AugmentOptions aug{.crop_padding = 2, .hflip = true};
  Loader whole(d, {.global_batch = 8, .seed = 4, .prefetch = 0, .augment = aug});
  Loader r1(d, {.global_batch = 8,
                .rank = 1,
                .world = 2,
                .seed = 4,
                .prefetch = 3,
                .workers = 2,
                .augment = aug});
  whole.start_epoch(2);
  r1.start_epoch(2);
  Batch a, b;
  int changed = 0;
  while (whole.next(a)) {
    ASSERT_TRUE(r1.next(b));
    EXPECT_EQ(std::memcmp(a.x + 4 * 16, b.x, 4 * 16 * sizeof(float)), 0);  // rank 1 = 2nd half
    for (int i = 0; i < 8 * 16; ++i)
      changed += a.x[i] !=
                 d.features[size_t(whole.order()[size_t(a.global_offset + i / 16)] * 16 + i % 16)];
  }
  EXPECT_GT(changed, 0);
}

TEST(LoaderExtra, ThrottleHoldsTheRate) {
  // 400 records of 4 + 4 bytes at 0.1 MB/s take >= 32 ms.
  auto src = std::make_shared<ThrottledSource>(std::make_shared<IotaSource>(400, 0), 0.1);
  Loader l(src, {.global_batch = 50, .prefetch = 0});
  Stopwatch sw;
  EXPECT_EQ(epoch_ids(l, 0).size(), 400u);
  EXPECT_GE(sw.seconds(), 0.031);
  EXPECT_GT(l.epoch_wait_seconds(), 0.025);  // synchronous: the consumer waited for all of it
  EXPECT_EQ(l.epoch_batches(), 8);
  EXPECT_THROW(ThrottledSource(std::make_shared<IotaSource>(1, 0), 0), ConfigError);
}

TEST(LoaderExtra, ErrorOnAWorkerReachesTheConsumer) {
  auto src = std::make_shared<IotaSource>(100, 0, /*fail_at=*/57);
  Loader l(src, {.global_batch = 10, .shuffle = false, .prefetch = 3, .workers = 2});
  l.start_epoch(0);
  Batch b;
  int ok = 0;
  try {
    while (l.next(b)) ++ok;
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("record 57"));
  }
  EXPECT_EQ(ok, 5);  // batches before the bad one still arrive, in order
}

}  // namespace
}  // namespace loom::data
