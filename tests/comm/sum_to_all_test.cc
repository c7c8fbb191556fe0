// The thread transport's one-pass float sum (sum_to_all_f32) and the native collectives built
// on it: sums in rank order, so every rank gets the same bits as a scalar left-to-right sum,
// whatever the alignment of the buffers and the length of the range (vector body, head, tail).
#include "loom/comm/sum_to_all.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "loom/comm/thread/thread_world.h"

namespace loom::comm {
namespace {

// Values whose sums round differently in different orders (unlike small integers).
std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen) * float(1 << (gen() % 20));
  return v;
}

float ordered_sum(const std::vector<std::vector<float>>& in, size_t offset, size_t i) {
  float s = in[0][offset + i];
  for (size_t q = 1; q < in.size(); ++q) s += in[q][offset + i];
  return s;
}

TEST(SumToAllTest, MatchesScalarRankOrderBitwiseForEveryAlignmentAndLength) {
  for (int n : {1, 2, 3, 5, 8}) {
    for (size_t offset : {0, 1, 3, 7}) {  // misaligns every buffer by offset floats
      for (size_t count : {0, 1, 7, 31, 32, 33, 100, 1000, 4099}) {
        std::vector<std::vector<float>> in;
        for (int q = 0; q < n; ++q) in.push_back(random_floats(offset + count, 100 * q + 7));
        std::vector<std::vector<float>> out = in;
        std::vector<const float*> src;
        std::vector<float*> dst;
        for (auto& v : in) src.push_back(v.data() + offset);
        for (auto& v : out) dst.push_back(v.data() + offset);
        // Range [1, count) where possible: a begin that is not the buffer's start.
        const size_t begin = count > 1 ? 1 : 0;
        sum_to_all_f32(src.data(), n, dst.data(), n, begin, count);
        for (int d = 0; d < n; ++d) {
          for (size_t i = 0; i < count; ++i) {
            const float want = i < begin ? in[size_t(d)][offset + i] : ordered_sum(in, offset, i);
            uint32_t a, b;
            std::memcpy(&a, &out[size_t(d)][offset + i], 4);
            std::memcpy(&b, &want, 4);
            ASSERT_EQ(a, b) << "n=" << n << " offset=" << offset << " count=" << count
                            << " dst=" << d << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(SumToAllTest, InPlaceIntoTheSourcesAndIntoOneDestination) {
  std::vector<float> a = random_floats(77, 1), b = random_floats(77, 2), c(77, 0.0f);
  const std::vector<float> a0 = a, b0 = b;
  const float* src[] = {a.data(), b.data()};
  float* one[] = {c.data()};
  sum_to_all_f32(src, 2, one, 1, 0, 77);  // reduce_scatter's form: only this rank's copy
  for (size_t i = 0; i < 77; ++i) {
    ASSERT_EQ(c[i], a0[i] + b0[i]);
    ASSERT_EQ(a[i], a0[i]);  // sources untouched
  }
  float* both[] = {a.data(), b.data()};
  sum_to_all_f32(src, 2, both, 2, 0, 77);  // allreduce's form: in place into every source
  for (size_t i = 0; i < 77; ++i) {
    ASSERT_EQ(a[i], a0[i] + b0[i]);
    ASSERT_EQ(b[i], a0[i] + b0[i]);
  }
}

// The native allreduce on buffers at different misalignments per rank: every rank ends with
// the same bits, equal to the rank-ordered scalar sum.
TEST(SumToAllTest, NativeAllreduceGivesEveryRankTheRankOrderedSumBitwise) {
  for (int n : {2, 3, 4}) {
    const size_t count = 5003;
    std::vector<std::vector<float>> in;
    for (int q = 0; q < n; ++q) in.push_back(random_floats(count + 8, 31 * q + 1));
    std::vector<std::vector<float>> bufs = in;
    ThreadWorld world(n);
    world.run([&](Communicator& c) {
      const size_t off = size_t(c.rank()) % 4;  // each rank its own alignment
      std::vector<float>& v = bufs[size_t(c.rank())];
      std::memmove(v.data() + off, in[size_t(c.rank())].data(), count * sizeof(float));
      c.allreduce(std::span<float>(v.data() + off, count));
      std::memmove(v.data(), v.data() + off, count * sizeof(float));
    });
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(bufs[size_t(r)][i], ordered_sum(in, 0, i)) << "n=" << n << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace loom::comm
