#include "loom/core/io/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace loom::core {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA; "123456789" -> 0xE3069283 (the check value).
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_ref("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(i * 131 + 7);
  EXPECT_EQ(crc32c(v.data(), v.size()), crc32c_ref(v.data(), v.size()));
  // Extending a CRC piecewise equals one pass.
  EXPECT_EQ(crc32c(v.data() + 500, 501, crc32c(v.data(), 500)), crc32c(v.data(), v.size()));
}

}  // namespace
}  // namespace loom::core
