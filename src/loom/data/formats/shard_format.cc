#include "loom/data/formats/shard_format.h"

#include <cmath>
#include <cstring>

#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"

namespace loom::data {

size_t dtype_size(ShardDtype t) {
  switch (t) {
    case ShardDtype::kUint8:
      return 1;
    case ShardDtype::kUint16:
      return 2;
    case ShardDtype::kFloat32:
      return 4;
  }
  return 4;
}
const char* dtype_name(ShardDtype t) {
  switch (t) {
    case ShardDtype::kUint8:
      return "uint8";
    case ShardDtype::kUint16:
      return "uint16";
    case ShardDtype::kFloat32:
      return "float32";
  }
  return "?";
}
const char* target_name(ShardTarget t) {
  switch (t) {
    case ShardTarget::kClassLabel:
      return "class label";
    case ShardTarget::kFloat:
      return "float targets";
    case ShardTarget::kNone:
      return "none (token stream)";
  }
  return "?";
}

int64_t shard_target_bytes(ShardTarget t, int64_t target_numel) {
  switch (t) {
    case ShardTarget::kClassLabel:
      return 4;
    case ShardTarget::kFloat:
      return 4 * target_numel;
    case ShardTarget::kNone:
      return 0;
  }
  return 0;
}
int64_t ShardInfo::target_bytes() const {
  return shard_target_bytes(target, target_numel);
}

int64_t ShardInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ShardInfo parse_shard_header(const uint8_t* data, size_t available, size_t file_size,
                             const std::string& name, std::vector<uint32_t>* chunk_crcs) {
  if (available < 12)
    throw InputError(fmt::format("{}: truncated shard: {} bytes, the header needs {}", name,
                                 available, sizeof(ShardHeader)));
  if (std::memcmp(data, kShardMagic, 8) != 0)
    throw InputError(
        fmt::format("{}: wrong magic: not a loom shard (expected \"LOOMSHRD\")", name));
  uint32_t version;
  std::memcpy(&version, data + 8, 4);
  if (version != 1 && version != kShardVersion)
    throw InputError(fmt::format("{}: shard format version {} (this loom reads versions 1 to {})",
                                 name, version, kShardVersion));
  // Both versions: the header's size, then its CRC over the bytes before the CRC field.
  const size_t header_size = version == 1 ? sizeof(ShardHeaderV1) : sizeof(ShardHeader);
  const size_t crc_at =
      version == 1 ? offsetof(ShardHeaderV1, header_crc) : offsetof(ShardHeader, header_crc);
  if (available < header_size)
    throw InputError(fmt::format("{}: truncated shard: {} bytes, the header needs {}", name,
                                 available, header_size));
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data + crc_at, 4);
  const uint32_t crc = core::crc32c(data, crc_at);
  if (crc != stored_crc)
    throw InputError(fmt::format(
        "{}: header CRC mismatch (stored {:08x}, computed {:08x}): the header is corrupt", name,
        stored_crc, crc));
  // A version 1 header is read into the version 2 layout: class labels, no extra section.
  ShardHeader h{};
  if (version == 1) {
    ShardHeaderV1 v1;
    std::memcpy(&v1, data, sizeof v1);
    std::memcpy(h.magic, v1.magic, 8);
    h.version = 1;
    h.data_offset = v1.data_offset;
    h.dtype = v1.dtype;
    h.ndims = v1.ndims;
    h.target = uint8_t(ShardTarget::kClassLabel);
    h.num_classes = v1.num_classes;
    h.count = v1.count;
    h.record_bytes = v1.record_bytes;
    h.chunk_records = v1.chunk_records;
    h.num_chunks = v1.num_chunks;
    std::memcpy(h.shape, v1.shape, sizeof h.shape);
    h.mean = v1.mean;
    h.stddev = v1.stddev;
    h.table_crc = v1.table_crc;
  } else {
    std::memcpy(&h, data, sizeof h);
  }
  // The bytes a writer leaves zero: a reserved byte (inside the CRC), the shape entries past
  // ndims, and in version 2 the last 4 bytes, which lie outside the CRC, so only this check
  // sees a flip there. Every loom that wrote shards wrote them zero.
  const uint8_t reserved1 = version == 1 ? uint8_t(data[18] | data[19]) : h.reserved;
  if (reserved1 != 0 || (version != 1 && h.reserved2 != 0))
    throw InputError(
        fmt::format("{}: reserved header bytes are not zero: the header is corrupt", name));
  ShardInfo info;
  info.version = int(version);
  if (h.dtype != uint8_t(ShardDtype::kUint8) && h.dtype != uint8_t(ShardDtype::kFloat32) &&
      h.dtype != uint8_t(ShardDtype::kUint16))
    throw InputError(fmt::format("{}: unsupported feature dtype code {}", name, h.dtype));
  info.dtype = ShardDtype(h.dtype);
  if (h.target > uint8_t(ShardTarget::kNone))
    throw InputError(fmt::format("{}: unsupported target code {}", name, h.target));
  info.target = ShardTarget(h.target);
  if (info.target == ShardTarget::kFloat) {
    if (h.target_numel < 1 || h.target_numel > kShardMaxTargetNumel)
      throw InputError(
          fmt::format("{}: absurd float target size {} per record", name, h.target_numel));
    info.target_numel = h.target_numel;
  } else if (h.target_numel != 0) {
    throw InputError(fmt::format("{}: {} targets with {} float values per record", name,
                                 target_name(info.target), h.target_numel));
  }
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
  for (int i = h.ndims; i < kShardMaxDims; ++i)
    if (h.shape[i] != 0)
      throw InputError(fmt::format(
          "{}: shape entry {} is {} past the record's {} dimensions: the header is corrupt", name,
          i, h.shape[i], h.ndims));
  info.num_classes = int(h.num_classes);
  if (info.target == ShardTarget::kFloat) {
    if (h.num_classes != 0)
      throw InputError(
          fmt::format("{}: a shard of float targets with a class count {}", name, h.num_classes));
  } else if (h.num_classes < 1 || h.num_classes > (1u << 24)) {
    throw InputError(fmt::format("{}: absurd class count {}", name, h.num_classes));
  }
  info.record_bytes = int64_t(h.record_bytes);
  const int64_t want_record = info.target_bytes() + numel * int64_t(dtype_size(info.dtype));
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
  if (h.extra_bytes > kShardMaxExtraBytes)
    throw InputError(fmt::format("{}: absurd extra section of {} bytes", name, h.extra_bytes));
  info.extra_offset = int64_t(header_size) + 4 * info.num_chunks;
  info.extra_bytes = h.extra_bytes;
  const int64_t table_end = info.extra_offset + info.extra_bytes;
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
  if (core::crc32c(data + header_size, size_t(4 * info.num_chunks)) != h.table_crc)
    throw InputError(fmt::format("{}: chunk table CRC mismatch: the header is corrupt", name));
  if (info.extra_bytes &&
      core::crc32c(data + info.extra_offset, size_t(info.extra_bytes)) != h.extra_crc)
    throw InputError(
        fmt::format("{}: CRC mismatch in the extra section ({} bytes): the "
                    "vocabulary is corrupt",
                    name, info.extra_bytes));
  // The padding up to the first record lies outside every CRC: it must be the zeros written.
  if (int64_t(available) >= info.data_offset) {
    for (int64_t i = table_end; i < info.data_offset; ++i)
      if (data[i] != 0)
        throw InputError(fmt::format(
            "{}: byte {} of the padding before the records is not zero: the file is corrupt", name,
            i));
  }
  if (!(h.stddev > 0) || !std::isfinite(h.mean) || !std::isfinite(h.stddev))
    throw InputError(
        fmt::format("{}: bad normalisation statistics mean {} stddev {}", name, h.mean, h.stddev));
  info.mean = h.mean;
  info.stddev = h.stddev;
  if (chunk_crcs) {
    chunk_crcs->resize(size_t(info.num_chunks));
    if (info.num_chunks)
      std::memcpy(chunk_crcs->data(), data + header_size, size_t(4 * info.num_chunks));
  }
  return info;
}

}  // namespace loom::data
