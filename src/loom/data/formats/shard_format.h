// loom's shard format: fixed-size records behind a small header, read by memory mapping.
// docs/data.md describes it byte by byte; this header pins the layout with static_assert.
//
//   [0, 152)              ShardHeader (little-endian; version 1 files have the 136-byte
//                         ShardHeaderV1, which lacks the target and extra-section fields)
//   [152, 152 + 4*C)      C chunk CRC32Cs, chunk c covering records [c*R, min((c+1)*R, count))
//   [.., + extra_bytes)   the extra section (a token shard's vocabulary), CRC in the header
//   [.., data_offset)     zero padding to a 4096-byte boundary (records start page aligned)
//   [data_offset, end)    count records of record_bytes each: the target (an int32 class
//                         label, target_numel float32 values, or nothing), then the features
//                         (numel values of dtype, C order); end == file size exactly.
//
// Version 2 carries every target the data path knows in one layout, so sequence data (token
// streams with their vocabulary) and regression data (float targets) need no further version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

// kUint16: token ids of a vocabulary larger than a byte's.
enum class ShardDtype : uint8_t { kUint8 = 1, kFloat32 = 2, kUint16 = 3 };
// What each record holds before its features.
enum class ShardTarget : uint8_t {
  kClassLabel = 0,  // int32 in [0, num_classes) (every version 1 shard)
  kFloat = 1,       // target_numel float32 values: regression
  kNone = 2,        // no target: a token stream, one token per record (num_classes = vocabulary)
};
const char* target_name(ShardTarget t);

size_t dtype_size(ShardDtype t);
const char* dtype_name(ShardDtype t);

constexpr char kShardMagic[8] = {'L', 'O', 'O', 'M', 'S', 'H', 'R', 'D'};
constexpr uint32_t kShardVersion = 2;  // written; version 1 is still read
constexpr int kShardMaxDims = 8;
constexpr size_t kShardAlign = 4096;

struct ShardHeader {
  char magic[8];                 // "LOOMSHRD"
  uint32_t version;              // kShardVersion
  uint32_t data_offset;          // first record's byte offset, a multiple of kShardAlign
  uint8_t dtype;                 // ShardDtype of the features
  uint8_t ndims;                 // of the record shape, 1..8
  uint8_t target;                // ShardTarget
  uint8_t reserved;              // 0
  uint32_t num_classes;          // labels lie in [0, num_classes); a token stream: vocabulary size
  uint64_t count;                // records
  uint64_t record_bytes;         // target bytes + numel * dtype_size
  uint64_t chunk_records;        // records per CRC chunk (the last may be shorter)
  uint64_t num_chunks;           // ceil(count / chunk_records)
  int64_t shape[kShardMaxDims];  // record shape; unused entries 0
  float mean, stddev;            // uint8: statistics of x/255 over the set; otherwise 0, 1
  uint32_t target_numel;         // float targets per record; 0 for the other targets
  uint32_t extra_bytes;          // the extra section after the chunk table (a vocabulary)
  uint32_t extra_crc;            // CRC32C of the extra section
  uint32_t table_crc;            // CRC32C of the chunk CRC table
  uint32_t header_crc;           // CRC32C of bytes [0, 144)
  uint32_t reserved2;            // 0
};
static_assert(sizeof(ShardHeader) == 152, "the on-disk header layout is fixed");
static_assert(offsetof(ShardHeader, count) == 24 && offsetof(ShardHeader, shape) == 56 &&
                  offsetof(ShardHeader, mean) == 120 &&
                  offsetof(ShardHeader, target_numel) == 128 &&
                  offsetof(ShardHeader, header_crc) == 144,
              "the on-disk header layout is fixed");

// Version 1: class labels only; its reserved bytes sit where version 2 has target.
struct ShardHeaderV1 {
  char magic[8];
  uint32_t version, data_offset;
  uint8_t dtype, ndims;
  uint16_t reserved;
  uint32_t num_classes;
  uint64_t count, record_bytes, chunk_records, num_chunks;
  int64_t shape[kShardMaxDims];
  float mean, stddev;
  uint32_t table_crc;   // CRC32C of the chunk CRC table
  uint32_t header_crc;  // CRC32C of bytes [0, 132)
};
static_assert(sizeof(ShardHeaderV1) == 136 && offsetof(ShardHeaderV1, header_crc) == 132,
              "the on-disk header layout is fixed");

// Bounds every writer and reader applies.
constexpr int64_t kShardMaxTargetNumel = int64_t(1) << 20;
constexpr int64_t kShardMaxExtraBytes = int64_t(1) << 26;

// Everything a reader needs, decoded and checked.
struct ShardInfo {
  int version = kShardVersion;
  ShardDtype dtype = ShardDtype::kUint8;
  ShardTarget target = ShardTarget::kClassLabel;
  int64_t target_numel = 0;  // kFloat: values per record
  std::vector<int64_t> shape;
  int num_classes = 0;
  int64_t count = 0;
  int64_t record_bytes = 0;
  int64_t chunk_records = 0;
  int64_t num_chunks = 0;
  int64_t data_offset = 0;
  int64_t extra_offset = 0, extra_bytes = 0;  // the extra section, within the header area
  float mean = 0, stddev = 1;
  int64_t numel() const;
  int64_t target_bytes() const;  // per record, before the features
  int64_t file_bytes() const { return data_offset + count * record_bytes; }
};

// The target bytes of a record: 4 for a label, 4 * target_numel for floats, 0 for none.
int64_t shard_target_bytes(ShardTarget t, int64_t target_numel);

// Decodes and checks the header, chunk table and extra section of a shard held in memory (the whole
// file, or at least its first data_offset bytes when `file_size` says how long the file is). Throws
// InputError naming `name` and the problem: truncated, wrong magic or version, header CRC,
// shape that disagrees with the file size, absurd values, an extra section
// whose CRC does not match. Reads versions 1 and 2.
ShardInfo parse_shard_header(const uint8_t* data, size_t available, size_t file_size,
                             const std::string& name, std::vector<uint32_t>* chunk_crcs);

}  // namespace loom::data
