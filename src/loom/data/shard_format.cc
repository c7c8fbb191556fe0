#include "loom/data/shard_format.h"

#include <cmath>
#include <cstring>

#include "loom/core/error.h"
#include "loom/data/crc32c.h"

namespace loom::data {

size_t dtype_size(ShardDtype t) {
  return t == ShardDtype::kUint8 ? 1 : 4;
}
const char* dtype_name(ShardDtype t) {
  return t == ShardDtype::kUint8 ? "uint8" : "float32";
}

int64_t ShardInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ShardInfo parse_shard_header(const uint8_t* data, size_t available, size_t file_size,
                             const std::string& name, std::vector<uint32_t>* chunk_crcs) {
  ShardHeader h;
  if (available < sizeof h)
    throw InputError(fmt::format("{}: truncated shard: {} bytes, the header needs {}", name,
                                 available, sizeof h));
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kShardMagic, 8) != 0)
    throw InputError(
        fmt::format("{}: wrong magic: not a loom shard (expected \"LOOMSHRD\")", name));
  if (h.version != kShardVersion)
    throw InputError(fmt::format("{}: shard format version {} (this loom reads version {})", name,
                                 h.version, kShardVersion));
  uint32_t crc = crc32c(data, offsetof(ShardHeader, header_crc));
  if (crc != h.header_crc)
    throw InputError(
        fmt::format("{}: header CRC mismatch (stored {:08x}, computed {:08x}): the "
                    "header is corrupt",
                    name, h.header_crc, crc));
  ShardInfo info;
  if (h.dtype != uint8_t(ShardDtype::kUint8) && h.dtype != uint8_t(ShardDtype::kFloat32))
    throw InputError(fmt::format("{}: unsupported feature dtype code {}", name, h.dtype));
  info.dtype = ShardDtype(h.dtype);
  if (h.ndims < 1 || h.ndims > kShardMaxDims)
    throw InputError(fmt::format("{}: absurd record shape: {} dimensions", name, h.ndims));
  int64_t numel = 1;
  for (int i = 0; i < h.ndims; ++i) {
    if (h.shape[i] < 1 || h.shape[i] > (int64_t(1) << 32) ||
        numel > (int64_t(1) << 32) / h.shape[i])
      throw InputError(
          fmt::format("{}: absurd record shape: dimension {} is {}", name, i, h.shape[i]));
    numel *= h.shape[i];
    info.shape.push_back(h.shape[i]);
  }
  info.num_classes = int(h.num_classes);
  if (h.num_classes < 1 || h.num_classes > (1u << 24))
    throw InputError(fmt::format("{}: absurd class count {}", name, h.num_classes));
  info.record_bytes = int64_t(h.record_bytes);
  const int64_t want_record = 4 + numel * int64_t(dtype_size(info.dtype));
  if (info.record_bytes != want_record)
    throw InputError(fmt::format("{}: record size {} disagrees with the shape ({} bytes needed)",
                                 name, h.record_bytes, want_record));
  if (h.count > (uint64_t(1) << 48) || h.chunk_records < 1 || h.chunk_records > (uint64_t(1) << 40))
    throw InputError(
        fmt::format("{}: absurd record count {} or chunk size {}", name, h.count, h.chunk_records));
  info.count = int64_t(h.count);
  info.chunk_records = int64_t(h.chunk_records);
  info.num_chunks = int64_t(h.num_chunks);
  if (info.num_chunks != (info.count + info.chunk_records - 1) / info.chunk_records)
    throw InputError(fmt::format("{}: {} chunks do not cover {} records of {} per chunk", name,
                                 h.num_chunks, h.count, h.chunk_records));
  info.data_offset = h.data_offset;
  const int64_t table_end = int64_t(sizeof h) + 4 * info.num_chunks;
  if (info.data_offset % int64_t(kShardAlign) != 0 || info.data_offset < table_end)
    throw InputError(fmt::format("{}: data offset {} is not a page boundary past the chunk table",
                                 name, h.data_offset));
  if (info.count > (int64_t(1) << 62) / info.record_bytes)
    throw InputError(fmt::format("{}: absurd size: {} records of {} bytes", name, info.count,
                                 info.record_bytes));
  if (int64_t(file_size) != info.file_bytes())
    throw InputError(fmt::format(
        "{}: header says {} records of shape {} ({} bytes with the header), the file has {} "
        "bytes{}",
        name, info.count, fmt::join(info.shape, "x"), info.file_bytes(), file_size,
        int64_t(file_size) < info.file_bytes() ? " (truncated)" : ""));
  if (int64_t(available) < table_end)
    throw InputError(fmt::format("{}: truncated chunk table", name));
  if (crc32c(data + sizeof h, size_t(4 * info.num_chunks)) != h.table_crc)
    throw InputError(fmt::format("{}: chunk table CRC mismatch: the header is corrupt", name));
  if (!(h.stddev > 0) || !std::isfinite(h.mean) || !std::isfinite(h.stddev))
    throw InputError(
        fmt::format("{}: bad normalisation statistics mean {} stddev {}", name, h.mean, h.stddev));
  info.mean = h.mean;
  info.stddev = h.stddev;
  if (chunk_crcs) {
    chunk_crcs->resize(size_t(info.num_chunks));
    if (info.num_chunks)
      std::memcpy(chunk_crcs->data(), data + sizeof h, size_t(4 * info.num_chunks));
  }
  return info;
}

}  // namespace loom::data
