// Histograms of a tensor's values: every finite value counted once, in the bucket whose limits
// hold it, as TensorBoard reads the buckets (bucket i is (limit[i-1], limit[i]], the first
// from min).
#include "loom/train/tensorboard_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/rng.h"

namespace loom::train::tensorboard {
namespace {

// Counts per bucket by the definition, value by value against the limits.
std::vector<double> counts_by_definition(const std::vector<float>& values, const Histogram& h) {
  std::vector<double> c(h.bucket_limit.size(), 0.0);
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool above_left = i == 0 ? double(f) >= h.min : double(f) > h.bucket_limit[i - 1];
      if (above_left && double(f) <= h.bucket_limit[i]) {
        c[i] += 1;
        break;
      }
    }
  }
  return c;
}

TEST(TensorBoardHistogram, EveryValueLandsInTheBucketItsLimitsGive) {
  for (uint64_t seed : {1, 2, 3}) {
    Rng rng(seed, 0, RngPurpose::kTest);
    std::vector<float> v(5000);
    for (float& x : v) x = rng.normal() * 0.05f + (seed == 3 ? 1e4f : 0.0f);
    v[7] = v[11];  // ties
    for (int buckets : {1, 7, 30}) {
      const Histogram h = histogram_of(v, buckets);
      ASSERT_EQ(h.bucket.size(), size_t(buckets));
      ASSERT_EQ(h.bucket_limit.size(), size_t(buckets));
      EXPECT_EQ(h.bucket, counts_by_definition(v, h)) << "seed " << seed << ", " << buckets;
      EXPECT_TRUE(std::is_sorted(h.bucket_limit.begin(), h.bucket_limit.end()));
      EXPECT_EQ(h.min, double(*std::min_element(v.begin(), v.end())));
      EXPECT_EQ(h.max, double(*std::max_element(v.begin(), v.end())));
      EXPECT_EQ(h.bucket_limit.back(), h.max);
      double sum = 0, sq = 0;
      for (float x : v) {
        sum += x;
        sq += double(x) * x;
      }
      EXPECT_EQ(h.num, double(v.size()));
      EXPECT_DOUBLE_EQ(h.sum, sum);
      EXPECT_DOUBLE_EQ(h.sum_squares, sq);
    }
  }
}

TEST(TensorBoardHistogram, NanAndInfAreLeftOut) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {1, std::nanf(""), 3, inf, -inf, 2};
  const Histogram h = histogram_of(v, 4);
  EXPECT_EQ(h.num, 3);
  EXPECT_EQ(h.min, 1);
  EXPECT_EQ(h.max, 3);
  EXPECT_EQ(h.sum, 6);
  EXPECT_EQ(h.bucket, counts_by_definition(v, h));
}

TEST(TensorBoardHistogram, EqualValuesMakeOneBucketAndNoValuesNone) {
  const std::vector<float> zeros(10, 0.0f);  // a bias at its initial zeros
  const Histogram h = histogram_of(zeros);
  EXPECT_EQ(h.bucket_limit, std::vector<double>{0.0});
  EXPECT_EQ(h.bucket, std::vector<double>{10.0});
  const Histogram none = histogram_of(std::vector<float>{std::nanf("")});
  EXPECT_EQ(none.num, 0);
  EXPECT_TRUE(none.bucket.empty());
}

}  // namespace
}  // namespace loom::train::tensorboard
