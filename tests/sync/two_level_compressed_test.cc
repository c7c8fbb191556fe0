// The compressed allreduce in two levels (two_level_compressed_allreduce.h) on thread worlds with
// faked machines: with the fp32 identity codec it is the plain two-level allreduce (bit for bit
// at 2 machines, to rounding against the flat ring); the bytes each rank sends across machines
// are the codec's encodings of its node-shard and nothing else, while inside a machine it sends
// fp32; lossy codecs stay within their stated error; error feedback telescopes per node-shard,
// so the mean of the outputs over many steps converges to the exact mean.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "comm/counting.h"
#include "compress/codec_test_util.h"
#include "loom/comm/algorithms.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/sync/allreduce/two_level_compressed_allreduce.h"

namespace loom::sync {
using namespace loom::compress;
namespace {

using testing::codec_named;
using testing::random_normal;

struct Shape {
  int n, per;  // world size, ranks per machine
};
std::string where(const Shape& s, const std::string& codec, size_t n) {
  return codec + " " + std::to_string(s.n / s.per) + " machines x " + std::to_string(s.per) +
         " ranks, n=" + std::to_string(n);
}

comm::CommOptions options() {
  comm::CommOptions o;
  o.timeout_s = 20;
  o.ring_chunk_bytes = 4096;  // several chunks per block: the rings pipeline
  return o;
}

std::vector<float> two_level_input(int rank, int step, size_t n) {
  return random_normal(n, 7919ull * uint64_t(rank) + 104729ull * uint64_t(step) + n);
}

// Every rank's output of `steps` calls, and the residuals every rank holds at the end.
struct TwoLevelOutcome {
  std::vector<std::vector<std::vector<float>>> out;  // [rank][step]
  std::vector<std::vector<double>> residual;         // [rank]
  std::vector<size_t> intra_bytes, inter_bytes;      // [rank], as the state says
};

TwoLevelOutcome run(const std::string& name, const Shape& s, size_t n, int steps,
                    const std::function<std::vector<float>(int, int)>& in) {
  auto codec = codec_named(name);
  const std::vector<int> machines = comm::consecutive_machines(s.n, s.per);
  TwoLevelOutcome o;
  o.out.assign(size_t(s.n), std::vector<std::vector<float>>(size_t(steps)));
  o.residual.assign(size_t(s.n), std::vector<double>(n, 0.0));
  o.intra_bytes.assign(size_t(s.n), 0);
  o.inter_bytes.assign(size_t(s.n), 0);
  comm::ThreadWorld world(s.n, options());
  world.run([&](comm::Communicator& c) {
    auto st = make_two_level_compressed_state(*codec, n, machines, s.n, c.rank(), "bucket 0");
    for (int t = 0; t < steps; ++t) {
      std::vector<float> v = in(c.rank(), t);
      two_level_compressed_allreduce(c, *codec, v, st);
      o.out[size_t(c.rank())][size_t(t)] = std::move(v);
    }
    st.add_residuals(o.residual[size_t(c.rank())]);
    o.intra_bytes[size_t(c.rank())] = st.intra_bytes;
    o.inter_bytes[size_t(c.rank())] = st.inter_bytes;
  });
  return o;
}

const Shape kShapes[] = {{4, 2}, {6, 2}, {6, 3}};

TEST(TwoLevelCompressed, IdentityCodecIsTheTwoLevelAllreduce) {
  for (const Shape& s : kShapes) {
    for (size_t n : {size_t(5), size_t(1001), size_t(20011)}) {
      SCOPED_TRACE(where(s, "fp32", n));
      const TwoLevelOutcome o =
          run("fp32", s, n, 1, [&](int r, int) { return two_level_input(r, 0, n); });
      std::vector<std::vector<float>> in(size_t(s.n));
      for (int r = 0; r < s.n; ++r) in[size_t(r)] = two_level_input(r, 0, n);
      const std::vector<int> machines = comm::consecutive_machines(s.n, s.per);
      std::vector<std::vector<float>> plain(size_t(s.n));
      comm::ThreadWorld world(s.n, options());
      world.run([&](comm::Communicator& c) {
        std::vector<float> v = two_level_input(c.rank(), 0, n);
        comm::algo::two_level_allreduce(c, machines, v.data(), n, comm::sum_f32());
        plain[size_t(c.rank())] = std::move(v);
      });
      for (size_t i = 0; i < n; ++i) {
        double exact = 0, magnitude = 0;
        for (int r = 0; r < s.n; ++r) {
          const float x = in[size_t(r)][i];
          exact += x;
          magnitude += std::fabs(x);
        }
        for (int r = 0; r < s.n; ++r) {
          const float got = o.out[size_t(r)][0][i];
          ASSERT_EQ(got, o.out[0][0][i]) << "rank " << r << " element " << i;  // same bits
          // n-1 float additions in any order (the flat ring's included).
          ASSERT_NEAR(got, exact, double(s.n) * magnitude * 0x1p-23) << "element " << i;
          // Two machines: the cross-machine sum is one addition either way.
          if (s.n / s.per == 2) {
            ASSERT_EQ(got, plain[size_t(r)][i]) << "element " << i;
          }
        }
      }
    }
  }
}

// What the codec sends for an allreduce of `shard` floats among M ranks, from its encoded
// sizes: stage 1 sends each other owner its stripe's encoding, stage 2's ring allgather sends
// M-1 slots of the largest encoding (striped codecs); a gathering codec sends its encoding of
// the whole shard to M-1 ranks (the ring allgather).
size_t codec_cross_bytes(const Codec& codec, size_t shard, int M, int machine) {
  if (codec.aggregation() == Aggregation::kGather)
    return size_t(M - 1) * codec.encoded_bytes(shard);
  size_t others = 0, slot = 0;
  for (int j = 0; j < M; ++j) {
    const size_t e = codec.encoded_bytes(comm::block_range(shard, M, j).size());
    slot = std::max(slot, e);
    if (j != machine) others += e;
  }
  return others + size_t(M - 1) * slot;
}

TEST(TwoLevelCompressed, OnlyTheCrossMachineStageIsEncoded) {
  for (const std::string name : {"int8", "onebit", "fp16", "topk"}) {
    auto codec = codec_named(name);
    for (const Shape& s : kShapes) {
      const int L = s.per, M = s.n / s.per;
      for (size_t n : {size_t(12000), size_t(10007)}) {
        SCOPED_TRACE(where(s, name, n));
        const std::vector<int> machines = comm::consecutive_machines(s.n, L);
        std::vector<std::vector<int64_t>> sent(size_t(s.n), std::vector<int64_t>(size_t(s.n), 0));
        std::vector<size_t> intra(size_t(s.n)), inter(size_t(s.n));
        comm::ThreadWorld world(s.n, options());
        world.run([&](comm::Communicator& c) {
          comm::testing::Counting counting(c, sent[size_t(c.rank())]);
          auto st = make_two_level_compressed_state(*codec, n, machines, s.n, c.rank(), "b");
          std::vector<float> v = two_level_input(c.rank(), 0, n);
          two_level_compressed_allreduce(counting, *codec, v, st);
          intra[size_t(c.rank())] = st.intra_bytes;
          inter[size_t(c.rank())] = st.inter_bytes;
        });
        for (int r = 0; r < s.n; ++r) {
          const int m = r / L, i = r % L;
          int64_t across = 0, inside = 0;
          for (int q = 0; q < s.n; ++q)
            (machines[size_t(q)] == machines[size_t(r)] ? inside : across) +=
                sent[size_t(r)][size_t(q)];
          // Inside: the fp32 ring reduce-scatter (every block but its own) and allgather (every
          // block but its right neighbour's).
          const size_t fp32_inside = (2 * n - comm::block_range(n, L, i).size() -
                                      comm::block_range(n, L, (i + 1) % L).size()) *
                                     sizeof(float);
          EXPECT_EQ(inside, int64_t(fp32_inside)) << "rank " << r;
          EXPECT_EQ(intra[size_t(r)], fp32_inside) << "rank " << r;
          const size_t shard = comm::block_range(n, L, i).size();
          const size_t want = codec_cross_bytes(*codec, shard, M, m);
          EXPECT_EQ(across, int64_t(want)) << "rank " << r;
          // The state's figure (compressed_allreduce_wire_bytes, which spreads stage 1 evenly
          // over the owners) agrees where the stripes encode to the same size.
          if (n % size_t(L * M) == 0) {
            EXPECT_EQ(inter[size_t(r)], want) << "rank " << r;
          }
          // Smaller than fp32 across by about the codec's ratio.
          const double fp32_across = 2.0 * (M - 1) / M * double(shard) * sizeof(float);
          EXPECT_LT(double(across), 0.6 * fp32_across) << "rank " << r;
        }
      }
    }
  }
}

// Normalised squared error of the first call against the exact sum, for N(0, 1) inputs: the
// figures tests/sync/compressed_allreduce_test.cc states for the flat exchange (docs/compress.md).
const std::map<std::string, double> kTwoLevelStatedNmse = {
    {"fp32", 1e-12}, {"fp16", 1e-6}, {"bf16", 3e-5}, {"int8", 2e-3}, {"onebit", 1.0}, {"topk", 1.0},
};

TEST(TwoLevelCompressed, LossyCodecsStayWithinTheirErrorAndErrorFeedbackTelescopes) {
  const int steps = 6;
  for (const auto& [name, bound] : kTwoLevelStatedNmse) {
    for (const Shape& s : kShapes) {
      const size_t n = 3001;
      SCOPED_TRACE(where(s, name, n));
      const TwoLevelOutcome o =
          run(name, s, n, steps, [&](int r, int t) { return two_level_input(r, t, n); });
      std::vector<double> sum_exact(n, 0.0), sum_out(n, 0.0);
      for (int t = 0; t < steps; ++t) {
        std::vector<double> exact(n, 0.0);
        for (int r = 0; r < s.n; ++r) {
          const std::vector<float> x = two_level_input(r, t, n);
          for (size_t i = 0; i < n; ++i) exact[i] += x[i];
        }
        for (int r = 1; r < s.n; ++r)
          ASSERT_EQ(0, std::memcmp(o.out[size_t(r)][size_t(t)].data(), o.out[0][size_t(t)].data(),
                                   n * sizeof(float)))
              << "rank " << r << " step " << t;
        double err2 = 0, ref2 = 0;
        for (size_t i = 0; i < n; ++i) {
          const double e = o.out[0][size_t(t)][i] - exact[i];
          err2 += e * e;
          ref2 += exact[i] * exact[i];
          sum_exact[i] += exact[i];
          sum_out[i] += o.out[0][size_t(t)][i];
        }
        if (t == 0) {
          EXPECT_LE(err2 / ref2, bound);
        }
      }
      // Summed over steps, outputs plus every rank's residual (each its node-shard's) equal the
      // summed inputs.
      std::vector<double> held(n, 0.0);
      for (int r = 0; r < s.n; ++r)
        for (size_t i = 0; i < n; ++i) held[i] += o.residual[size_t(r)][i];
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(sum_out[i] + held[i], sum_exact[i],
                    2e-4 * (1 + std::fabs(sum_exact[i])) * steps)
            << "element " << i;
      // The residuals of one machine's ranks tile the bucket: each element is held by one
      // rank per machine, the other ranks of the machine hold none of it.
      if (name != "fp32") {
        const int L = s.per;
        for (int r = 0; r < s.n; ++r) {
          const comm::BlockRange shard = comm::block_range(n, L, r % L);
          for (size_t i = 0; i < n; ++i) {
            if (i < shard.begin || i >= shard.end) {
              ASSERT_EQ(o.residual[size_t(r)][i], 0.0) << "rank " << r << " element " << i;
            }
          }
        }
      }
    }
  }
}

TEST(TwoLevelCompressed, TheMeanOverManyStepsConvergesToTheExactMean) {
  // Each rank sends the same gradient every step; with error feedback what the codec holds back
  // is sent later, so the mean output approaches the exact sum.
  const Shape s{4, 2};
  const size_t n = 2048;
  for (const std::string name : {"onebit", "int8"}) {
    SCOPED_TRACE(name);
    const int steps = 200;
    const TwoLevelOutcome o =
        run(name, s, n, steps, [&](int r, int) { return two_level_input(r, 0, n); });
    std::vector<double> exact(n, 0.0);
    for (int r = 0; r < s.n; ++r) {
      const std::vector<float> x = two_level_input(r, 0, n);
      for (size_t i = 0; i < n; ++i) exact[i] += x[i];
    }
    auto rms_error = [&](int upto) {
      double err2 = 0, ref2 = 0;
      for (size_t i = 0; i < n; ++i) {
        double mean = 0;
        for (int t = 0; t < upto; ++t) mean += o.out[0][size_t(t)][i];
        mean /= upto;
        err2 += (mean - exact[i]) * (mean - exact[i]);
        ref2 += exact[i] * exact[i];
      }
      return std::sqrt(err2 / ref2);
    };
    // (1-bit's error falls about as 1/sqrt(steps) here, int8's as 1/steps: the flat exchange
    // of the machines' sums does the same.)
    const double first = rms_error(1), half = rms_error(steps / 4), all = rms_error(steps);
    EXPECT_LT(all, 0.1) << "first step " << first;
    EXPECT_LT(all, first / 10) << "first step " << first;
    EXPECT_LT(all, half / 1.5) << "after " << steps / 4 << " steps " << half;
  }
}

TEST(TwoLevelCompressed, BucketsSmallerThanAMachineAreExact) {
  // Fewer floats than ranks per machine: some node-shard is empty, and the bucket is summed in
  // fp32 on every rank; a collective after it still matches (the ranks drew the same tags).
  const Shape s{6, 3};
  for (size_t n : {size_t(1), size_t(2)}) {
    const TwoLevelOutcome o = run(
        "onebit", s, n, 3, [&](int r, int t) { return std::vector<float>(n, float(r + 1 + t)); });
    for (int r = 0; r < s.n; ++r)
      for (int t = 0; t < 3; ++t)
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(o.out[size_t(r)][size_t(t)][i], 21.0f + 6 * t);
  }
}

TEST(TwoLevelCompressed, PowerSgdAndUnevenMachinesAreRefused) {
  auto psgd = codec_named("powersgd");
  EXPECT_FALSE(can_two_level(*psgd));
  EXPECT_TRUE(can_two_level(*codec_named("onebit")));
  EXPECT_THROW(make_two_level_compressed_state(*codec_named("int8"), 100,
                                               comm::consecutive_machines(5, 2), 5, 0, "b"),
               ConfigError);
}

}  // namespace
}  // namespace loom::sync
