// Writes a shard file record by record into `path.tmp.<pid>`, then renames it over `path` in
// finish(): a failed or interrupted conversion leaves nothing half-written behind.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/io/atomic_file.h"
#include "loom/data/formats/shard_format.h"

namespace loom::data {

struct ShardSpec {
  ShardSpec() = default;
  // The common case, class labels: {dtype, shape, num_classes, count, chunk_records}.
  ShardSpec(ShardDtype d, std::vector<int64_t> s, int classes, int64_t n, int64_t chunk = 0)
      : dtype(d), shape(std::move(s)), num_classes(classes), count(n), chunk_records(chunk) {}
  ShardDtype dtype = ShardDtype::kUint8;
  std::vector<int64_t> shape;  // record shape
  int num_classes = 10;        // labels; a token stream: vocabulary size; float targets: 0
  int64_t count = 0;           // records that will be appended
  int64_t chunk_records = 0;   // 0: about 1 MiB per chunk
  ShardTarget target = ShardTarget::kClassLabel;
  int64_t target_numel = 0;    // kFloat: values per record
  std::vector<uint8_t> extra;  // the extra section (a token stream's vocabulary)
  // The file the shape, count and classes come from (a converter's input): what an error about
  // them names, since that is where the user can fix them. Empty: the shard's own path.
  std::string source;
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
  // A shard of float targets: target_numel values, each finite (else InputError naming
  // `where`), then the features.
  void append_targets(const float* targets, const void* features, const std::string& where = "");
  // A token stream: the record is its features alone.
  void append_features(const void* features);
  // Writes the header and chunk table, flushes, and renames into place.
  void finish();
  const ShardInfo& info() const { return info_; }

 private:
  void write_record(const void* target, const void* features);
  // float32 features are finite: NaN or Inf is an InputError naming `where` and the feature,
  // here where the values enter, not later in training.
  void check_features(const void* features, const std::string& where) const;
  void end_chunk();
  std::string path_;
  ShardInfo info_;
  std::unique_ptr<core::AtomicFile> out_;  // null once finished
  int64_t written_ = 0;
  uint32_t chunk_crc_ = 0;
  std::vector<uint32_t> crcs_;
  std::vector<uint8_t> record_;
  std::vector<uint64_t> hist_;  // uint8 pixel histogram, for the header's statistics
  std::vector<uint8_t> extra_;
};

}  // namespace loom::data
