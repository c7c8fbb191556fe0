// Reads a shard file through a memory mapping, as a SampleSource for the loader. uint8 features
// are normalised with the same arithmetic as the in-memory IDX path (normalise_byte), so
// shards converted from IDX files give bitwise the same batches.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/shard_format.h"
#include "loom/data/sources/sample_source.h"

namespace loom::data {

enum class ShardVerify {
  kNone,  // trust the data (benchmarks of raw reading)
  kLazy,  // check a chunk's CRC32C the first time a record of it is read (default)
  kAll,   // check every chunk when opening
};

struct ShardOpenOptions {
  ShardVerify verify = ShardVerify::kLazy;
  // uint8 features: (x/255 - mean)/stddev with these; nullopt = the statistics in the header.
  std::optional<Normalisation> norm;
};

class ShardSource final : public SampleSource {
 public:
  explicit ShardSource(const std::string& path, ShardOpenOptions opts = {});
  // Over a file already mapped (or MappedFile::borrow'ed bytes).
  ShardSource(core::MappedFile file, ShardOpenOptions opts);

  int64_t count() const override { return info_.count; }
  std::vector<int64_t> sample_shape() const override { return info_.shape; }
  int num_classes() const override { return info_.num_classes; }
  int64_t target_numel() const override { return info_.target_numel; }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override;
  void gather_targets(const int64_t* idx, int64_t n, float* t) const override;
  int64_t stored_record_bytes() const override { return info_.record_bytes; }
  int64_t chunk_records() const override { return info_.chunk_records; }
  void will_need(int64_t first, int64_t last) const override;
  void release(int64_t first, int64_t last) const override;

  const ShardInfo& info() const { return info_; }
  const std::string& path() const { return file_.path(); }
  Normalisation normalisation() const { return norm_; }
  // Raw record bytes (target then features).
  const uint8_t* record(int64_t i) const;
  // Checks chunk c's CRC32C; InputError naming the file, chunk and records on a mismatch.
  void verify_chunk(int64_t c) const;
  // Chunks whose CRC does not match (for `loom data inspect`).
  std::vector<int64_t> bad_chunks() const;

 private:
  void ensure_verified(int64_t record) const;
  core::MappedFile file_;
  ShardInfo info_;
  std::vector<uint32_t> crcs_;
  ShardVerify verify_;
  Normalisation norm_;
  ByteAffine affine_;
  std::unique_ptr<std::atomic<uint8_t>[]> verified_;
};

}  // namespace loom::data
