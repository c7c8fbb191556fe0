#include "loom/compress/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loom::compress {
namespace {

TEST(Half, HandComputedRounding) {
  EXPECT_EQ(float_to_half_ref(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_ref(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_ref(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half_ref(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_ref(65519.0f), 0x7bff);             // below the midpoint to 2^16
  EXPECT_EQ(float_to_half_ref(65520.0f), 0x7c00);             // the tie rounds to even: Inf
  EXPECT_EQ(float_to_half_ref(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_half_ref(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half_ref(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half_ref(0x1p-25f), 0x0000);             // tie -> even 0
  EXPECT_EQ(float_to_half_ref(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(float_to_half_ref(3 * 0x1p-25f), 0x0002);         // 1.5 ulp: tie -> even 2
  EXPECT_EQ(float_to_half_ref(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up to normal
  EXPECT_EQ(float_to_half_ref(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_ref(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_ref(1.0f + 0x1p-8f), 0x3f80);      // tie -> even
  EXPECT_EQ(float_to_bf16_ref(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16_ref(-3.0f), 0xc040);
}

TEST(Half, EveryFiniteHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // Inf / NaN
    float f = half_to_float_ref(uint16_t(h));
    EXPECT_EQ(float_to_half_ref(f), h) << h;
    // The midpoint above rounds to the even one of the pair.
  }
  EXPECT_TRUE(std::isinf(half_to_float_ref(0x7c00)));
  EXPECT_EQ(half_to_float_ref(0x0001), 0x1p-24f);
}

}  // namespace
}  // namespace loom::compress
