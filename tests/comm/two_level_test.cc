// The two-level allreduce (algorithms.h) against the flat ring, on thread worlds whose machines
// are faked (comm.ranks_per_node, or an explicit machine list): sums of integers exactly, random
// floats to rounding, for 2x2, 2x3, 3x2, 2x4, one machine, one rank per machine, ranks placed
// round-robin, and odd counts; the bytes each rank sends to other machines; and how
// comm.algorithm picks it, falls back and refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>
#include <string>

#include "comm/comm_test_util.h"
#include "comm/counting.h"
#include "loom/comm/algorithms.h"
#include "loom/comm/group_communicator.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/plan/comm_reader.h"

namespace loom::comm {
namespace {

using testing::Counting;
using testing::expected_sum;
using testing::make_input;

// world size, ranks per machine
struct Shape {
  int n, per;
};
const Shape kShapes[] = {{4, 2}, {6, 3}, {6, 2}, {8, 4}, {4, 4}, {4, 1}, {1, 1}};
const size_t kTwoLevelCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 1001, 4099, 30011};

CommOptions opts(size_t chunk_bytes, size_t small_bytes) {
  CommOptions o;
  o.ring_chunk_bytes = chunk_bytes;
  o.small_message_bytes = small_bytes;
  o.timeout_s = 20;
  return o;
}
// Tiny chunks and threshold (every stage pipelines; small blocks cross by halving-doubling, the
// others by ring), and the defaults.
const CommOptions kOptions[] = {opts(12, 64), opts(512 << 10, 64 << 10)};

std::string where(int n, int per, size_t count) {
  return "n=" + std::to_string(n) + " per machine=" + std::to_string(per) +
         " count=" + std::to_string(count);
}

// Runs fn on every rank of a thread world of n ranks; returns each rank's buffer.
template <typename Fn>
std::vector<std::vector<float>> run(int n, const CommOptions& o, Fn fn) {
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  ThreadWorld world(n, o);
  world.run([&](Communicator& c) { out[size_t(c.rank())] = fn(c); });
  return out;
}

TEST(TwoLevelAllreduce, SumsIntegersExactlyLikeTheRing) {
  for (const Shape& s : kShapes) {
    const std::vector<int> machines = consecutive_machines(s.n, s.per);
    for (const CommOptions& o : kOptions) {
      for (size_t count : kTwoLevelCounts) {
        auto two = run(s.n, o, [&](Communicator& c) {
          std::vector<float> v = make_input(c.rank(), count);
          algo::two_level_allreduce(c, machines, v.data(), count, sum_f32());
          return v;
        });
        auto ring = run(s.n, o, [&](Communicator& c) {
          std::vector<float> v = make_input(c.rank(), count);
          algo::ring_allreduce(c, v.data(), count, sum_f32());
          return v;
        });
        for (int r = 0; r < s.n; ++r) {
          ASSERT_EQ(two[size_t(r)].size(), count);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(two[size_t(r)][i], expected_sum(s.n, i))
                << where(s.n, s.per, count) << " rank=" << r << " i=" << i;
          }
          ASSERT_EQ(two[size_t(r)], ring[size_t(r)]) << where(s.n, s.per, count);
        }
      }
    }
  }
}

TEST(TwoLevelAllreduce, RandomFloatsMatchTheRingToRounding) {
  for (const Shape& s : kShapes) {
    const std::vector<int> machines = consecutive_machines(s.n, s.per);
    const size_t count = 20011;
    std::vector<std::vector<float>> in(static_cast<size_t>(s.n));
    for (int r = 0; r < s.n; ++r) {
      std::mt19937 gen(uint32_t(1000 + r));
      std::normal_distribution<float> d(0.0f, 3.0f);
      for (size_t i = 0; i < count; ++i) in[size_t(r)].push_back(d(gen));
    }
    auto two = run(s.n, kOptions[0], [&](Communicator& c) {
      std::vector<float> v = in[size_t(c.rank())];
      algo::two_level_allreduce(c, machines, v.data(), count, sum_f32());
      return v;
    });
    auto ring = run(s.n, kOptions[0], [&](Communicator& c) {
      std::vector<float> v = in[size_t(c.rank())];
      algo::ring_allreduce(c, v.data(), count, sum_f32());
      return v;
    });
    for (size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < s.n; ++r) {
        exact += double(in[size_t(r)][i]);
        magnitude += std::fabs(double(in[size_t(r)][i]));
      }
      // n-1 float additions in any order: each within n ulps of the magnitude of the terms.
      const double bound = double(s.n) * magnitude * 0x1p-23;
      for (int r = 0; r < s.n; ++r) {
        ASSERT_NEAR(two[size_t(r)][i], exact, bound) << where(s.n, s.per, count) << " i=" << i;
        ASSERT_NEAR(two[size_t(r)][i], ring[size_t(r)][i], 2 * bound) << where(s.n, s.per, count);
        // Every rank ends with the same bits: the allgather copies one owner's sum.
        ASSERT_EQ(two[size_t(r)][i], two[0][i]) << where(s.n, s.per, count) << " i=" << i;
      }
    }
  }
}

TEST(TwoLevelAllreduce, RanksNeedNotBeNumberedMachineByMachine) {
  // Round-robin placement: ranks 0, 2, 4 on machine 0 and 1, 3, 5 on machine 1 (mpirun
  // --map-by node), and a scrambled one.
  for (const std::vector<int>& machines :
       {std::vector<int>{0, 1, 0, 1, 0, 1}, std::vector<int>{7, 3, 3, 5, 7, 5}}) {
    for (size_t count : {size_t(5), size_t(4099)}) {
      auto two = run(6, kOptions[0], [&](Communicator& c) {
        std::vector<float> v = make_input(c.rank(), count);
        algo::two_level_allreduce(c, machines, v.data(), count, sum_f32());
        return v;
      });
      for (int r = 0; r < 6; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(two[size_t(r)][i], expected_sum(6, i));
    }
  }
}

TEST(TwoLevelAllreduce, AnyReducer) {
  const std::vector<int> machines = consecutive_machines(6, 3);
  ThreadWorld world(6, kOptions[0]);
  world.run([&](Communicator& c) {
    std::vector<int64_t> v = {int64_t(c.rank()), -int64_t(c.rank()), 5};
    algo::two_level_allreduce(c, machines, v.data(), v.size(), max_i64());
    EXPECT_EQ(v, (std::vector<int64_t>{5, 0, 5}));
    std::vector<double> d(101, 0.5 * c.rank());
    algo::two_level_allreduce(c, machines, d.data(), d.size(), sum_f64());
    for (double x : d) EXPECT_EQ(x, 7.5);
  });
}

TEST(TwoLevelAllreduce, SendsWhatTheModelSaysAcrossAndInsideMachines) {
  // M machines of L ranks, N floats divisible by L x M: each rank sends 2(M-1)/M x N/L floats
  // to other machines and 2(L-1)/L x N inside its own (the ring: 2(n-1)/n x N, of which
  // 2(n-1)/n x N crosses a machine wherever its neighbour is on another one).
  for (const Shape& s : {Shape{4, 2}, Shape{6, 3}, Shape{6, 2}, Shape{8, 4}}) {
    const int L = s.per, M = s.n / s.per;
    const size_t N = size_t(L) * size_t(M) * 1000;
    const std::vector<int> machines = consecutive_machines(s.n, L);
    // The ring across machines (the model's): halving-doubling, for blocks under
    // comm.small_kib, sends whole blocks more where M is not a power of two (its folding).
    for (const CommOptions& o : {opts(12, 64), opts(512 << 10, 64)}) {
      std::vector<std::vector<int64_t>> sent(static_cast<size_t>(s.n),
                                             std::vector<int64_t>(size_t(s.n), 0));
      ThreadWorld world(s.n, o);
      world.run([&](Communicator& c) {
        Counting counting(c, sent[size_t(c.rank())]);
        std::vector<float> v = make_input(c.rank(), N);
        algo::two_level_allreduce(counting, machines, v.data(), N, sum_f32());
      });
      for (int r = 0; r < s.n; ++r) {
        int64_t across = 0, inside = 0;
        for (int q = 0; q < s.n; ++q)
          (machines[size_t(q)] == machines[size_t(r)] ? inside : across) +=
              sent[size_t(r)][size_t(q)];
        EXPECT_EQ(across, int64_t(2 * (M - 1) * (N / size_t(L) / size_t(M)) * sizeof(float)))
            << where(s.n, L, N) << " rank=" << r;
        EXPECT_EQ(inside, int64_t(2 * (L - 1) * (N / size_t(L)) * sizeof(float)))
            << where(s.n, L, N) << " rank=" << r;
        EXPECT_EQ(across + inside, int64_t(2 * (s.n - 1) * (N / size_t(s.n)) * sizeof(float)));
      }
    }
  }
}

TEST(TwoLevelReduceScatter, OwnsOneBlockOfTheSumAndTheAllgatherRestoresTheWhole) {
  // The sharded update's halves: each rank owns sub-block `machine` of block `local`, all owned
  // ranges tile the buffer once, the owner holds the exact sum there, and after the two-level
  // allgather every rank holds every owner's values. Bytes: the flat reduce-scatter's and
  // allgather's, 2 (n - n/(L M)) floats, with 2 (M-1)/M x N/L of them across machines.
  for (const Shape& s : {Shape{4, 2}, Shape{6, 3}, Shape{6, 2}, Shape{8, 4}}) {
    const int L = s.per, M = s.n / s.per;
    const std::vector<int> machines = consecutive_machines(s.n, L);
    for (size_t count : {size_t(7), size_t(1001), size_t(24000)}) {
      std::vector<BlockRange> owned(size_t(s.n));
      std::vector<std::vector<int64_t>> sent(static_cast<size_t>(s.n),
                                             std::vector<int64_t>(size_t(s.n), 0));
      auto out = run(s.n, kOptions[0], [&](Communicator& c) {
        Counting counting(c, sent[size_t(c.rank())]);
        std::vector<float> v = make_input(c.rank(), count);
        const BlockRange mine =
            algo::two_level_reduce_scatter(counting, machines, v.data(), count, sum_f32());
        owned[size_t(c.rank())] = mine;
        for (size_t i = mine.begin; i < mine.end; ++i)
          EXPECT_EQ(v[i], expected_sum(s.n, i)) << where(s.n, L, count) << " i=" << i;
        // Every element outside its block becomes a marker the allgather must overwrite.
        std::vector<float> params(count, -1.0f);
        for (size_t i = mine.begin; i < mine.end; ++i) params[i] = v[i] + float(i);
        algo::two_level_allgather(counting, machines, params.data(), count, sizeof(float));
        return params;
      });
      std::vector<int> cover(count, 0);
      for (int r = 0; r < s.n; ++r) {
        for (size_t i = owned[size_t(r)].begin; i < owned[size_t(r)].end; ++i) ++cover[i];
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[size_t(r)][i], expected_sum(s.n, i) + float(i))
              << where(s.n, L, count) << " rank=" << r << " i=" << i;
      }
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(cover[i], 1) << where(s.n, L, count);
      if (count % size_t(s.n) != 0) continue;
      for (int r = 0; r < s.n; ++r) {
        int64_t across = 0, inside = 0;
        for (int q = 0; q < s.n; ++q)
          (machines[size_t(q)] == machines[size_t(r)] ? inside : across) +=
              sent[size_t(r)][size_t(q)];
        EXPECT_EQ(across, int64_t(2 * (M - 1) * (count / size_t(s.n)) * sizeof(float)));
        EXPECT_EQ(inside, int64_t(2 * (L - 1) * (count / size_t(L)) * sizeof(float)));
      }
    }
  }
}

TEST(TwoLevelAllreduce, RefusesMachinesWithDifferentRankCounts) {
  ThreadWorld world(5, kOptions[0]);
  std::mutex mu;
  std::vector<std::string> errors;
  world.run([&](Communicator& c) {
    std::vector<float> v(10, 1.0f);
    try {
      algo::two_level_allreduce(c, consecutive_machines(5, 2), v.data(), v.size(), sum_f32());
    } catch (const ConfigError& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("3 machines with 2, 2, 1 ranks"));
}

// ---- comm.algorithm: what Communicator::allreduce runs ----

CommOptions with(AllreduceAlgorithm a, int per) {
  CommOptions o = kOptions[0];
  o.algorithm = a;
  o.ranks_per_node = per;
  return o;
}

TEST(AllreduceAlgorithmChoice, TwoLevelThroughTheCommunicatorEqualsTheRing) {
  for (const Shape& s : kShapes) {
    for (size_t count : {size_t(3), size_t(1001), size_t(30011)}) {
      auto two = run(s.n, with(AllreduceAlgorithm::kTwoLevel, s.per), [&](Communicator& c) {
        std::vector<float> v = make_input(c.rank(), count);
        c.allreduce(std::span<float>(v));
        return v;
      });
      auto ring = run(s.n, with(AllreduceAlgorithm::kRing, 0), [&](Communicator& c) {
        std::vector<float> v = make_input(c.rank(), count);
        c.allreduce(std::span<float>(v));
        return v;
      });
      EXPECT_EQ(two, ring) << where(s.n, s.per, count);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(two[0][i], expected_sum(s.n, i));
    }
  }
}

TEST(AllreduceAlgorithmChoice, PathsByLayout) {
  using P = Communicator::AllreducePath;
  struct Case {
    AllreduceAlgorithm a;
    int n, per;
    size_t bytes;
    P want;
  };
  const size_t big = 1 << 20, tiny = 16;  // around comm.small_kib (64 bytes here)
  const Case cases[] = {
      {AllreduceAlgorithm::kAuto, 4, 2, big, P::kTwoLevel},
      {AllreduceAlgorithm::kAuto, 4, 2, tiny, P::kTransport},  // latency-bound: flat
      {AllreduceAlgorithm::kAuto, 4, 0, big, P::kTransport},   // one machine
      {AllreduceAlgorithm::kAuto, 4, 1, big, P::kTransport},   // one rank per machine
      {AllreduceAlgorithm::kAuto, 5, 2, big, P::kTransport},   // uneven: flat
      {AllreduceAlgorithm::kTwoLevel, 6, 3, tiny, P::kTwoLevel},
      {AllreduceAlgorithm::kTwoLevel, 4, 0, big, P::kTransport},  // falls back
      {AllreduceAlgorithm::kTwoLevel, 4, 1, big, P::kTransport},
      {AllreduceAlgorithm::kRing, 4, 2, tiny, P::kRing},
      {AllreduceAlgorithm::kHalvingDoubling, 4, 2, big, P::kHalvingDoubling},
  };
  for (const Case& k : cases) {
    ThreadWorld world(k.n, with(k.a, k.per));
    for (int r = 0; r < k.n; ++r)
      EXPECT_EQ(world.comm(r).allreduce_path(k.bytes), k.want)
          << allreduce_algorithm_name(k.a) << " " << where(k.n, k.per, k.bytes);
  }
}

TEST(AllreduceAlgorithmChoice, TwoLevelOverUnevenMachinesIsRefusedAtTheStart) {
  try {
    ThreadWorld world(5, with(AllreduceAlgorithm::kTwoLevel, 2));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("3 machines with 2, 2, 1 ranks"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("comm.ranks_per_node = 2"));
  }
}

TEST(AllreduceAlgorithmChoice, ConfigKeys) {
  Config cfg = Config::from_string("[comm]\nalgorithm = \"two-level\"\nranks_per_node = 2\n");
  const CommOptions o = plan::read_comm_options(cfg);
  EXPECT_EQ(o.algorithm, AllreduceAlgorithm::kTwoLevel);
  EXPECT_EQ(o.ranks_per_node, 2);
  EXPECT_EQ(plan::read_comm_options(Config()).algorithm, AllreduceAlgorithm::kAuto);
  try {
    plan::read_comm_options(Config::from_string("[comm]\nalgorithm = \"tree\"\n"));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("two-level"));
  }
  EXPECT_THROW(plan::read_comm_options(Config::from_string("[comm]\nranks_per_node = -1\n")),
               ConfigError);
}

TEST(GroupCommunicator, MapsRanksAndRefusesOutsiders) {
  ThreadWorld world(4, kOptions[0]);
  world.run([&](Communicator& c) {
    // Ranks 3 and 1 (in that order) and 0 and 2 as two groups of two.
    const std::vector<int> members = c.rank() % 2 ? std::vector<int>{3, 1} : std::vector<int>{0, 2};
    GroupCommunicator g(c, members);
    EXPECT_EQ(g.size(), 2);
    EXPECT_EQ(g.parent_rank(g.rank()), c.rank());
    std::vector<float> v = {float(c.rank())};
    g.allreduce(std::span<float>(v));
    EXPECT_EQ(v[0], c.rank() % 2 ? 4.0f : 2.0f);
    EXPECT_THROW(g.isend(2, v.data(), 4, 0), CommError);
  });
}

}  // namespace
}  // namespace loom::comm
