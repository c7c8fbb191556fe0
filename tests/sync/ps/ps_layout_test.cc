#include "loom/sync/ps/ps_layout.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::sync {
namespace {

TEST(PsLayout, CutsBucketsAtShardBoundaries) {
  // Buckets in ready order: [70, 100), [20, 70), [0, 20); 3 servers own [0,34) [34,67) [67,100).
  const std::vector<Bucket> buckets = {{70, 30, 1}, {20, 50, 2}, {0, 20, 1}};
  const PsLayout l = plan_ps_layout(100, buckets, 3);
  ASSERT_EQ(l.shards.size(), 3u);
  EXPECT_EQ(l.shards[0].begin, 0);
  EXPECT_EQ(l.shards[0].end, 34);
  EXPECT_EQ(l.shards[1].end, 67);
  EXPECT_EQ(l.shards[2].end, 100);
  ASSERT_EQ(l.by_bucket.size(), 3u);
  ASSERT_EQ(l.by_bucket[0].size(), 1u);  // [70, 100) lies in server 2
  EXPECT_EQ(l.by_bucket[0][0].server, 2);
  ASSERT_EQ(l.by_bucket[1].size(), 3u);  // [20, 70) crosses all three
  EXPECT_EQ(l.by_bucket[1][0].offset, 20);
  EXPECT_EQ(l.by_bucket[1][0].count, 14);
  EXPECT_EQ(l.by_bucket[1][1].offset, 34);
  EXPECT_EQ(l.by_bucket[1][1].count, 33);
  EXPECT_EQ(l.by_bucket[1][2].offset, 67);
  EXPECT_EQ(l.by_bucket[1][2].count, 3);
  // Server 2 gets its pieces in bucket order, indexed 0, 1.
  ASSERT_EQ(l.by_server[2].size(), 2u);
  EXPECT_EQ(l.by_server[2][0].offset, 70);
  EXPECT_EQ(l.by_server[2][1].offset, 67);
  EXPECT_EQ(l.by_server[2][1].index, 1);
  // Server 0's pieces cover its shard exactly: [20, 34) then [0, 20).
  int64_t covered = 0;
  for (const PsPiece& p : l.by_server[0]) covered += p.count;
  EXPECT_EQ(covered, 34);
}

TEST(PsLayout, MoreServersThanParametersIsAConfigError) {
  const std::vector<Bucket> buckets = {{0, 5, 1}};
  EXPECT_NO_THROW(plan_ps_layout(5, buckets, 5));
  try {
    plan_ps_layout(5, buckets, 6);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ps.servers = 6"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_ps_layout(5, buckets, 0), ConfigError);
}

}  // namespace
}  // namespace loom::sync
