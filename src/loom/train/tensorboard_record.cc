// TFRecord framing (tensorboard_record.h), on the shard format's CRC-32C.
#include "loom/train/tensorboard_record.h"

#include "loom/core/io/crc32c.h"

namespace loom::train {

namespace {
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}
}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = core::crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload.data(), payload.size()), 4);
  return out;
}

}  // namespace loom::train
