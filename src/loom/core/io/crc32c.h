// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), as in iSCSI (RFC 3720) and
// LevelDB/ext4. SSE4.2 has an instruction for it, so checking a page-cached shard costs a few
// percent of reading it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::core {

// crc32c(data) extends `crc` (0 for a fresh checksum) over data.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// Bit-at-a-time reference (slow), for tests.
uint32_t crc32c_ref(const void* data, size_t n, uint32_t crc = 0);

}  // namespace loom::core
