// loom's shard format: fixed-size records behind a small header, read by memory mapping.
// docs/data.md describes it byte by byte; this header pins the layout with static_assert.
//
//   [0, 136)              ShardHeader (little-endian)
//   [136, 136 + 4*C)      C chunk CRC32Cs, chunk c covering records [c*R, min((c+1)*R, count))
//   [.., data_offset)     zero padding to a 4096-byte boundary (records start page aligned)
//   [data_offset, end)    count records of record_bytes each: int32 label, then the features
//                         (numel values of dtype, C order); end == file size exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

enum class ShardDtype : uint8_t { kUint8 = 1, kFloat32 = 2 };

size_t dtype_size(ShardDtype t);
const char* dtype_name(ShardDtype t);

constexpr char kShardMagic[8] = {'L', 'O', 'O', 'M', 'S', 'H', 'R', 'D'};
constexpr uint32_t kShardVersion = 1;
constexpr int kShardMaxDims = 8;
constexpr size_t kShardAlign = 4096;

struct ShardHeader {
  char magic[8];                 // "LOOMSHRD"
  uint32_t version;              // kShardVersion
  uint32_t data_offset;          // first record's byte offset, a multiple of kShardAlign
  uint8_t dtype;                 // ShardDtype of the features
  uint8_t ndims;                 // of the record shape, 1..8
  uint16_t reserved;             // 0
  uint32_t num_classes;          // labels lie in [0, num_classes)
  uint64_t count;                // records
  uint64_t record_bytes;         // 4 + numel * dtype_size
  uint64_t chunk_records;        // records per CRC chunk (the last may be shorter)
  uint64_t num_chunks;           // ceil(count / chunk_records)
  int64_t shape[kShardMaxDims];  // record shape; unused entries 0
  float mean, stddev;            // uint8: statistics of x/255 over the set; float32: 0, 1
  uint32_t table_crc;            // CRC32C of the chunk CRC table
  uint32_t header_crc;           // CRC32C of bytes [0, 132)
};
static_assert(sizeof(ShardHeader) == 136, "the on-disk header layout is fixed");
static_assert(offsetof(ShardHeader, count) == 24 && offsetof(ShardHeader, shape) == 56 &&
                  offsetof(ShardHeader, mean) == 120 && offsetof(ShardHeader, header_crc) == 132,
              "the on-disk header layout is fixed");

// Everything a reader needs, decoded and checked.
struct ShardInfo {
  ShardDtype dtype = ShardDtype::kUint8;
  std::vector<int64_t> shape;
  int num_classes = 0;
  int64_t count = 0;
  int64_t record_bytes = 0;
  int64_t chunk_records = 0;
  int64_t num_chunks = 0;
  int64_t data_offset = 0;
  float mean = 0, stddev = 1;
  int64_t numel() const;
  int64_t file_bytes() const { return data_offset + count * record_bytes; }
};

// Decodes and checks the header and chunk table of a shard held in memory (the whole file, or
// at least its first data_offset bytes when `file_size` says how long the file is). Throws
// InputError naming `name` and the problem: truncated, wrong magic or version, header CRC,
// shape that disagrees with the file size, absurd values.
ShardInfo parse_shard_header(const uint8_t* data, size_t available, size_t file_size,
                             const std::string& name, std::vector<uint32_t>* chunk_crcs);

}  // namespace loom::data
