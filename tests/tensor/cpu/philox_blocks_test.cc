// The vectorised Philox generators against the scalar loom::philox4x32, bit for bit, at block
// numbers where the counter's high word is zero, where the low word wraps inside one call (the
// AVX-512 path adds lane offsets to the low word and carries into the high word), and far out.
#include "loom/tensor/cpu/philox_blocks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "loom/core/cpu_features.h"
#include "loom/core/rng.h"

namespace loom::cpu {
namespace {

void expect_blocks(const std::vector<uint32_t>& out, uint64_t first_block, int blocks,
                   uint64_t key) {
  for (int l = 0; l < blocks; ++l) {
    const uint64_t b = first_block + uint64_t(l);
    const auto want = philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key);
    for (int w = 0; w < 4; ++w)
      ASSERT_EQ(out[size_t(4 * l + w)], want[size_t(w)])
          << "first block " << first_block << " lane " << l << " word " << w;
  }
}

const uint64_t kFirstBlocks[] = {0,
                                 1,
                                 5,
                                 (uint64_t(1) << 32) - 20,  // the low word wraps mid-call
                                 (uint64_t(1) << 32) - 1,
                                 uint64_t(1) << 32,
                                 (uint64_t(1) << 34) + 3,
                                 0xfffffffeffffffe5ull,  // high word 0xfffffffe, then wraps
                                 ~uint64_t(0) - 40};
const uint64_t kKeys[] = {0, 0x1234567890abcdefull, ~uint64_t(0)};

TEST(PhiloxBlocks, MatchesScalarPhilox) {
  std::vector<uint32_t> out(4 * kPhiloxBlocks);
  for (uint64_t key : kKeys)
    for (uint64_t first : kFirstBlocks) {
      philox_blocks(first, key, out.data());
      expect_blocks(out, first, kPhiloxBlocks, key);
    }
}

TEST(PhiloxBlocks, WideMatchesScalarPhilox) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<uint32_t> out(4 * kPhiloxWideBlocks);
  for (uint64_t key : kKeys)
    for (uint64_t first : kFirstBlocks) {
      philox_blocks_wide(first, key, out.data());
      expect_blocks(out, first, kPhiloxWideBlocks, key);
    }
}

}  // namespace
}  // namespace loom::cpu
