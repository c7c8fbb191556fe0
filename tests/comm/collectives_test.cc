// Every collective, native (thread transport) and generic (on point-to-point), for world sizes
// 1..8 and element counts including 0, 1 and odd sizes, against closed-form sums.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "comm/comm_test_util.h"
#include "comm/p2p_only.h"
#include "loom/comm/algorithms.h"
#include "loom/comm/thread/thread_world.h"

namespace loom::comm {
namespace {

using testing::expected_sum;
using testing::input_value;
using testing::make_input;
using testing::P2POnly;

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 13, 31, 100, 1001, 4099};
const int kMaxWorld = 8;

// Small chunks so that the ring's chunking and pipelining run even on small buffers.
CommOptions small_chunks() {
  CommOptions o;
  o.ring_chunk_bytes = 12;  // 3 floats
  o.small_message_bytes = 64;
  o.timeout_s = 20;
  return o;
}

enum class Path { kNative, kGeneric, kRing, kHalvingDoubling };
std::string path_name(Path p) {
  switch (p) {
    case Path::kNative:
      return "native";
    case Path::kGeneric:
      return "generic";
    case Path::kRing:
      return "ring";
    case Path::kHalvingDoubling:
      return "halving-doubling";
  }
  return "?";
}

// Runs fn(comm) on a thread world of n ranks, through the native or the generic path.
template <typename Fn>
void run_world(int n, Path path, const CommOptions& o, Fn fn) {
  ThreadWorld world(n, o);
  world.run([&](Communicator& c) {
    if (path == Path::kNative) {
      fn(c);
    } else {
      P2POnly p(c, o);
      fn(static_cast<Communicator&>(p));
    }
  });
}

class AllreduceTest : public ::testing::TestWithParam<Path> {};

TEST_P(AllreduceTest, SumsEveryElementOverRanks) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    for (size_t count : kCounts) {
      for (const CommOptions& o : {small_chunks(), CommOptions{}}) {
        std::vector<std::vector<float>> out(static_cast<size_t>(n));
        run_world(n, path, o, [&](Communicator& c) {
          std::vector<float> v = make_input(c.rank(), count);
          if (path == Path::kRing) {
            algo::ring_allreduce(c, v.data(), v.size(), sum_f32());
          } else if (path == Path::kHalvingDoubling) {
            algo::halving_doubling_allreduce(c, v.data(), v.size(), sum_f32());
          } else {
            c.allreduce(std::span<float>(v));
          }
          out[size_t(c.rank())] = std::move(v);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(out[size_t(r)].size(), count);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(out[size_t(r)][i], expected_sum(n, i))
                << path_name(path) << " n=" << n << " count=" << count << " rank=" << r
                << " i=" << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, AllreduceTest,
                         ::testing::Values(Path::kNative, Path::kGeneric, Path::kRing,
                                           Path::kHalvingDoubling),
                         [](const auto& info) {
                           std::string s = path_name(info.param);
                           for (char& ch : s) {
                             if (ch == '-') ch = '_';
                           }
                           return s;
                         });

class PathTest : public ::testing::TestWithParam<Path> {};
// The collectives the ring path has no variant of (raw bytes with integer reducers, the sharded
// update): the communicator's own and the generic algorithms only.
class CommunicatorPathTest : public ::testing::TestWithParam<Path> {};

TEST_P(PathTest, ReduceScatterLeavesEachRankItsBlockSummed) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    for (size_t count : kCounts) {
      std::vector<std::vector<float>> out(static_cast<size_t>(n));
      run_world(n, path, small_chunks(), [&](Communicator& c) {
        std::vector<float> v = make_input(c.rank(), count);
        if (path == Path::kRing) {
          algo::ring_reduce_scatter(c, v.data(), v.size(), sum_f32());
        } else {
          c.reduce_scatter(std::span<float>(v));
        }
        out[size_t(c.rank())] = std::move(v);
      });
      for (int r = 0; r < n; ++r) {
        const BlockRange b = block_range(count, n, r);
        for (size_t i = b.begin; i < b.end; ++i) {
          ASSERT_EQ(out[size_t(r)][i], expected_sum(n, i))
              << path_name(path) << " n=" << n << " count=" << count << " rank=" << r;
        }
      }
    }
  }
}

TEST_P(PathTest, AllgatherFillsEveryBlockFromItsOwner) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    for (size_t count : kCounts) {
      std::vector<std::vector<float>> out(static_cast<size_t>(n));
      run_world(n, path, small_chunks(), [&](Communicator& c) {
        std::vector<float> v(count, -1.0f);
        const BlockRange b = block_range(count, n, c.rank());
        for (size_t i = b.begin; i < b.end; ++i) v[i] = input_value(c.rank(), i);
        if (path == Path::kRing) {
          algo::ring_allgather(c, v.data(), v.size(), sizeof(float));
        } else {
          c.allgather(std::span<float>(v));
        }
        out[size_t(c.rank())] = std::move(v);
      });
      for (int r = 0; r < n; ++r) {
        for (int owner = 0; owner < n; ++owner) {
          const BlockRange b = block_range(count, n, owner);
          for (size_t i = b.begin; i < b.end; ++i) {
            ASSERT_EQ(out[size_t(r)][i], input_value(owner, i))
                << path_name(path) << " n=" << n << " count=" << count << " rank=" << r;
          }
        }
      }
    }
  }
}

TEST_P(PathTest, BroadcastCopiesRootsBufferFromEveryRoot) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001)}) {
      for (int root = 0; root < n; ++root) {
        std::vector<std::vector<float>> out(static_cast<size_t>(n));
        run_world(n, path, small_chunks(), [&](Communicator& c) {
          std::vector<float> v = make_input(c.rank(), count);
          if (path == Path::kRing) {
            algo::binomial_broadcast(c, v.data(), v.size() * sizeof(float), root);
          } else {
            c.broadcast(std::span<float>(v), root);
          }
          out[size_t(c.rank())] = std::move(v);
        });
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(out[size_t(r)][i], input_value(root, i))
                << path_name(path) << " n=" << n << " root=" << root << " rank=" << r;
          }
        }
      }
    }
  }
}

TEST_P(PathTest, BarrierLetsNobodyPassBeforeAllArrive) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    std::atomic<int> arrived{0};
    std::atomic<int> early{0};
    run_world(n, path, small_chunks(), [&](Communicator& c) {
      for (int round = 1; round <= 3; ++round) {
        arrived.fetch_add(1);
        if (path == Path::kRing) {
          algo::dissemination_barrier(c);
        } else {
          c.barrier();
        }
        if (arrived.load() < round * n) early.fetch_add(1);
        // A second barrier so that no rank starts the next round before all have checked.
        if (path == Path::kRing) {
          algo::dissemination_barrier(c);
        } else {
          c.barrier();
        }
      }
    });
    EXPECT_EQ(early.load(), 0) << path_name(path) << " n=" << n;
  }
}

TEST_P(CommunicatorPathTest, RawByteCollectivesWithIntegerReducers) {
  const Path path = GetParam();
  for (int n = 1; n <= kMaxWorld; ++n) {
    run_world(n, path, small_chunks(), [&](Communicator& c) {
      const int64_t r = c.rank();
      std::vector<int64_t> sum = {r, 1000 * r + 7, -r * r};
      c.allreduce(sum.data(), sum.size() * sizeof(int64_t), sum_i64());
      const int64_t s1 = int64_t(n) * (n - 1) / 2;
      const int64_t s2 = int64_t(n - 1) * n * (2 * n - 1) / 6;
      EXPECT_EQ(sum[0], s1);
      EXPECT_EQ(sum[1], 1000 * s1 + 7 * n);
      EXPECT_EQ(sum[2], -s2);
      std::vector<int64_t> mx = {r, -r};
      c.allreduce(mx.data(), mx.size() * sizeof(int64_t), max_i64());
      EXPECT_EQ(mx[0], n - 1);
      EXPECT_EQ(mx[1], 0);
      std::vector<double> d = {0.5 * double(r)};
      c.allreduce(d.data(), sizeof(double), sum_f64());
      EXPECT_EQ(d[0], 0.5 * double(s1));
      // Bytes: allgather 3 bytes per rank, broadcast a string.
      std::vector<char> g(size_t(3 * n), '?');
      for (int k = 0; k < 3; ++k) g[size_t(3 * r + k)] = char('a' + r);
      c.allgather(g.data(), g.size(), 1);
      for (int q = 0; q < n; ++q) EXPECT_EQ(g[size_t(3 * q + 2)], char('a' + q));
      std::string msg = r == n - 1 ? "hello from last" : "xxxxxxxxxxxxxxx";
      c.broadcast(msg.data(), msg.size(), n - 1);
      EXPECT_EQ(msg, "hello from last");
    });
  }
}

TEST_P(CommunicatorPathTest, ShardedUpdateSumsUpdatesItsBlockAndGathers) {
  const Path path = GetParam();
  auto updated = [](float sum, size_t i) { return sum * 0.5f + float(i % 5); };
  for (int n = 1; n <= kMaxWorld; ++n) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(4099), size_t(20011)}) {
      std::vector<std::vector<float>> grads(static_cast<size_t>(n)), params(grads.size());
      std::vector<std::vector<std::pair<size_t, size_t>>> calls(grads.size());
      run_world(n, path, small_chunks(), [&](Communicator& c) {
        const size_t r = size_t(c.rank());
        std::vector<float> g = make_input(c.rank(), count), p(count, -1.0f);
        c.sharded_update(std::span<float>(g), std::span<float>(p), [&](size_t b, size_t e) {
          calls[r].push_back({b, e});
          for (size_t i = b; i < e; ++i) p[i] = updated(g[i], i);
        });
        grads[r] = std::move(g);
        params[r] = std::move(p);
      });
      for (int r = 0; r < n; ++r) {
        const BlockRange b = block_range(count, n, r);
        // The calls tile this rank's block exactly, in order.
        size_t next = b.begin;
        for (auto [begin, end] : calls[size_t(r)]) {
          ASSERT_EQ(begin, next) << "n=" << n << " count=" << count << " rank=" << r;
          ASSERT_LT(begin, end);
          next = end;
        }
        ASSERT_EQ(next, b.end) << "n=" << n << " count=" << count << " rank=" << r;
        for (size_t i = b.begin; i < b.end; ++i)
          ASSERT_EQ(grads[size_t(r)][i], expected_sum(n, i)) << "rank " << r << " i " << i;
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(params[size_t(r)][i], updated(expected_sum(n, i), i))
              << path_name(path) << " n=" << n << " count=" << count << " rank=" << r << " i=" << i;
      }
    }
  }
}

// The thread transport's fused sharded update must give exactly the bits of its own
// reduce-scatter, one update over the block, and allgather (the base class's definition), with
// sums that depend on the order of addition.
TEST(ShardedUpdateTest, FusedIsBitwiseTheThreeCollectives) {
  auto value = [](int r, size_t i) {
    return 1.0f / float(3 + r) + float(i % 97) * 1.1e-3f + float(r) * 7.7e7f * float(i % 3 == 0);
  };
  for (int n = 1; n <= 5; ++n) {
    for (size_t count : {size_t(1), size_t(1001), size_t(10007)}) {
      std::vector<std::vector<float>> fused(static_cast<size_t>(n)), split(fused.size());
      run_world(n, Path::kNative, CommOptions{}, [&](Communicator& c) {
        std::vector<float> g(count), p(count), g2(count), p2(count);
        for (size_t i = 0; i < count; ++i) g[i] = g2[i] = value(c.rank(), i);
        auto step = [](std::vector<float>& gs, std::vector<float>& ps) {
          return [&](size_t b, size_t e) {
            for (size_t i = b; i < e; ++i) ps[i] = gs[i] * 0.3f - 1.0f / float(i + 1);
          };
        };
        c.sharded_update(std::span<float>(g), std::span<float>(p), step(g, p));
        c.Communicator::sharded_update(std::span<float>(g2), std::span<float>(p2), step(g2, p2));
        fused[size_t(c.rank())] = std::move(p);
        split[size_t(c.rank())] = std::move(p2);
      });
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(std::memcmp(fused[size_t(r)].data(), split[0].data(), count * sizeof(float)), 0)
            << "n=" << n << " count=" << count << " rank=" << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, PathTest,
                         ::testing::Values(Path::kNative, Path::kGeneric, Path::kRing),
                         [](const auto& info) { return path_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Paths, CommunicatorPathTest,
                         ::testing::Values(Path::kNative, Path::kGeneric),
                         [](const auto& info) { return path_name(info.param); });

// The fused ring allreduce must give, on every rank, exactly the bits of ring reduce-scatter
// followed by ring allgather: inputs whose float sums depend on the order of addition (unlike
// the integer-valued sweeps above), so a changed reduction chain or a chunk landing in the wrong
// place shows up as a bit difference.
TEST(RingAllreduceTest, BitwiseSameAsReduceScatterThenAllgatherOnEveryRank) {
  auto value = [](int r, size_t i) {
    return 1.0f / float(3 + r) + float(i % 97) * 1.1e-3f + float(r) * 7.7e7f * float(i % 3 == 0);
  };
  for (int n = 1; n <= 5; ++n) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001), size_t(4099)}) {
      for (const CommOptions& o : {small_chunks(), CommOptions{}}) {
        std::vector<std::vector<float>> fused(static_cast<size_t>(n));
        std::vector<std::vector<float>> split(static_cast<size_t>(n));
        run_world(n, Path::kGeneric, o, [&](Communicator& c) {
          std::vector<float> a(count), b(count);
          for (size_t i = 0; i < count; ++i) a[i] = b[i] = value(c.rank(), i);
          algo::ring_allreduce(c, a.data(), count, sum_f32());
          algo::ring_reduce_scatter(c, b.data(), count, sum_f32());
          algo::ring_allgather(c, b.data(), count, sizeof(float));
          fused[size_t(c.rank())] = std::move(a);
          split[size_t(c.rank())] = std::move(b);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(fused[size_t(r)].size(), count);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(std::memcmp(&fused[size_t(r)][i], &split[0][i], sizeof(float)), 0)
                << "n=" << n << " count=" << count << " rank=" << r << " i=" << i << ": "
                << fused[size_t(r)][i] << " vs " << split[0][i];
            ASSERT_EQ(std::memcmp(&split[size_t(r)][i], &split[0][i], sizeof(float)), 0);
          }
        }
      }
    }
  }
}

TEST(BlockRangeTest, SplitsCountWithRemainderOnFirstRanks) {
  EXPECT_EQ(block_range(10, 3, 0).begin, 0u);
  EXPECT_EQ(block_range(10, 3, 0).end, 4u);
  EXPECT_EQ(block_range(10, 3, 1).begin, 4u);
  EXPECT_EQ(block_range(10, 3, 1).end, 7u);
  EXPECT_EQ(block_range(10, 3, 2).begin, 7u);
  EXPECT_EQ(block_range(10, 3, 2).end, 10u);
  EXPECT_EQ(block_range(2, 4, 3).size(), 0u);
  EXPECT_EQ(block_range(0, 1, 0).size(), 0u);
}

}  // namespace
}  // namespace loom::comm
