#include "loom/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace loom {
namespace {

TEST(Rng, SameKeySameStreamDifferentPurposeDiffers) {
  Rng a(7, 0, RngPurpose::kInit), b(7, 0, RngPurpose::kInit), c(7, 0, RngPurpose::kDropout);
  Rng d(7, 1, RngPurpose::kInit);
  int same_c = 0, same_d = 0;
  for (int i = 0; i < 100; ++i) {
    uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    same_c += x == c.next_u32();
    same_d += x == d.next_u32();
  }
  EXPECT_LT(same_c, 3);
  EXPECT_LT(same_d, 3);
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r(1, 0, RngPurpose::kTest);
  double s = 0, s2 = 0, n1 = 0, n2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    s += u, s2 += u * u;
    float z = r.normal();
    n1 += z, n2 += z * z;
  }
  EXPECT_NEAR(s / n, 0.5, 0.005);
  EXPECT_NEAR(s2 / n - 0.25, 1.0 / 12, 0.005);
  EXPECT_NEAR(n1 / n, 0.0, 0.01);
  EXPECT_NEAR(n2 / n, 1.0, 0.02);
}

TEST(Rng, BelowIsInRangeAndCoversIt) {
  Rng r(3, 0, RngPurpose::kTest);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = r.below(10);
    ASSERT_LT(x, 10u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST(Rng, PhiloxRandomAccessMatchesSequentialBlocks) {
  // Element i of philox_uniform is word i%4 of block i/4: a mask for any slice has the same bits.
  uint64_t key = derive_key(5, 0, RngPurpose::kDropout);
  auto blk = philox4x32({1, 0, 0, 0}, key);
  EXPECT_EQ(philox_uniform(key, 6), float(blk[2] >> 8) * (1.0f / 16777216.0f));
}

}  // namespace
}  // namespace loom
