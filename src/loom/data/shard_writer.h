// Writes a shard file record by record into `path.tmp.<pid>`, then renames it over `path` in
// finish(): a failed or interrupted conversion leaves nothing half-written behind.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "loom/data/shard_format.h"

namespace loom::data {

struct ShardSpec {
  ShardDtype dtype = ShardDtype::kUint8;
  std::vector<int64_t> shape;  // record shape
  int num_classes = 10;
  int64_t count = 0;          // records that will be appended
  int64_t chunk_records = 0;  // 0: about 1 MiB per chunk
};

class ShardWriter {
 public:
  ShardWriter(const std::string& path, const ShardSpec& spec);
  ~ShardWriter();  // removes the temporary file unless finish() succeeded
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // `features` holds numel values of spec.dtype. Labels outside [0, num_classes) ->
  // InputError naming `where` (the source file and record).
  void append(int32_t label, const void* features, const std::string& where = "");
  // Writes the header and chunk table, flushes, and renames into place.
  void finish();
  const ShardInfo& info() const { return info_; }

 private:
  void end_chunk();
  std::string path_, tmp_;
  ShardInfo info_;
  FILE* file_ = nullptr;
  int64_t written_ = 0;
  uint32_t chunk_crc_ = 0;
  std::vector<uint32_t> crcs_;
  std::vector<uint8_t> record_;
  std::vector<uint64_t> hist_;  // uint8 pixel histogram, for the header's statistics
  bool done_ = false;
};

}  // namespace loom::data
