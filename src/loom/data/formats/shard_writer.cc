#include "loom/data/formats/shard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"
#include "loom/data/sources/dataset.h"

namespace loom::data {

ShardWriter::ShardWriter(const std::string& path, const ShardSpec& spec) : path_(path) {
  const std::string& src = spec.source.empty() ? path : spec.source;
  if (spec.shape.empty() || int(spec.shape.size()) > kShardMaxDims)
    throw InputError(fmt::format("{}: records of {} dimensions ({}); a shard record has 1 to {}",
                                 src, spec.shape.size(), fmt::join(spec.shape, ", "),
                                 kShardMaxDims));
  if (spec.target == ShardTarget::kFloat) {
    if (spec.target_numel < 1 || spec.target_numel > kShardMaxTargetNumel)
      throw InputError(fmt::format("{}: {} float targets per record; give 1 to {}", src,
                                   spec.target_numel, kShardMaxTargetNumel));
    if (spec.num_classes != 0)
      throw Error(fmt::format("{}: a shard of float targets has no class count", src));
  } else if (spec.num_classes < 1) {
    throw InputError(fmt::format("{}: num_classes must be >= 1", src));
  }
  if (spec.target != ShardTarget::kFloat && spec.target_numel != 0)
    throw Error(fmt::format("{}: only float targets have a target size", src));
  if (int64_t(spec.extra.size()) > kShardMaxExtraBytes)
    throw InputError(fmt::format("{}: an extra section of {} bytes; a shard holds at most {}", src,
                                 spec.extra.size(), kShardMaxExtraBytes));
  // The bounds parse_shard_header() reads back: a shard written is a shard that loads.
  if (spec.num_classes > (1 << 24))
    throw InputError(
        fmt::format("{}: {} classes; a shard holds at most {}", src, spec.num_classes, 1 << 24));
  int64_t numel = 1;
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    const int64_t d = spec.shape[i];
    if (d < 1 || d > (int64_t(1) << 32) || numel > (int64_t(1) << 32) / d)
      throw InputError(fmt::format(
          "{}: record shape ({}): dimension {} is {}; a shard record holds 1 to 2^32 values", src,
          fmt::join(spec.shape, ", "), i, d));
    numel *= d;
  }
  if (spec.count < 0 || spec.count > (int64_t(1) << 48))
    throw InputError(fmt::format("{}: {} records; a shard holds at most 2^48", src, spec.count));
  if (spec.chunk_records < 0 || spec.chunk_records > (int64_t(1) << 40))
    throw InputError(fmt::format("{}: {} records per chunk: give 1 to 2^40, or 0 for about 1 MiB",
                                 src, spec.chunk_records));
  info_.dtype = spec.dtype;
  info_.target = spec.target;
  info_.target_numel = spec.target_numel;
  info_.shape = spec.shape;
  info_.num_classes = spec.num_classes;
  info_.count = spec.count;
  info_.record_bytes = info_.target_bytes() + info_.numel() * int64_t(dtype_size(spec.dtype));
  info_.chunk_records = spec.chunk_records > 0
                            ? spec.chunk_records
                            : std::max<int64_t>(1, (1 << 20) / info_.record_bytes);
  info_.num_chunks = (info_.count + info_.chunk_records - 1) / info_.chunk_records;
  extra_ = spec.extra;
  info_.extra_offset = int64_t(sizeof(ShardHeader)) + 4 * info_.num_chunks;
  info_.extra_bytes = int64_t(extra_.size());
  const int64_t table_end = info_.extra_offset + info_.extra_bytes;
  info_.data_offset =
      (table_end + int64_t(kShardAlign) - 1) / int64_t(kShardAlign) * int64_t(kShardAlign);
  record_.resize(size_t(info_.record_bytes));
  if (spec.dtype == ShardDtype::kUint8 && spec.target != ShardTarget::kNone) hist_.assign(256, 0);
  out_ = std::make_unique<core::AtomicFile>(path_);
  // Header and table are written last; reserve their space now.
  std::vector<uint8_t> zeros(size_t(info_.data_offset), 0);
  if (std::fwrite(zeros.data(), 1, zeros.size(), out_->file()) != zeros.size() ||
      std::fflush(out_->file()) != 0)
    throw InputError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append(int32_t label, const void* features, const std::string& where) {
  if (info_.target != ShardTarget::kClassLabel)
    throw Error(
        fmt::format("{}: a label appended to a shard of {}", path_, target_name(info_.target)));
  if (label < 0 || label >= info_.num_classes)
    throw InputError(fmt::format("{}: label {} is outside [0, {})",
                                 where.empty() ? fmt::format("record {}", written_) : where, label,
                                 info_.num_classes));
  check_features(features, where);
  write_record(&label, features);  // little-endian hosts only (x86-64, aarch64)
}

void ShardWriter::check_features(const void* features, const std::string& where) const {
  if (info_.dtype != ShardDtype::kFloat32) return;
  const float* f = static_cast<const float*>(features);
  const int64_t n = info_.numel();
  for (int64_t j = 0; j < n; ++j)
    if (!std::isfinite(f[j]))
      throw InputError(fmt::format("{}: feature {} is {}",
                                   where.empty() ? fmt::format("record {}", written_) : where, j,
                                   f[j]));
}

void ShardWriter::append_targets(const float* targets, const void* features,
                                 const std::string& where) {
  if (info_.target != ShardTarget::kFloat)
    throw Error(fmt::format("{}: float targets appended to a shard of {}", path_,
                            target_name(info_.target)));
  for (int64_t j = 0; j < info_.target_numel; ++j)
    if (!std::isfinite(targets[j]))
      throw InputError(fmt::format("{}: target {} is {}",
                                   where.empty() ? fmt::format("record {}", written_) : where, j,
                                   targets[j]));
  check_features(features, where);
  write_record(targets, features);
}

void ShardWriter::append_features(const void* features) {
  if (info_.target != ShardTarget::kNone)
    throw Error(fmt::format("{}: a record without a target appended to a shard of {}", path_,
                            target_name(info_.target)));
  check_features(features, "");
  write_record(nullptr, features);
}

void ShardWriter::write_record(const void* target, const void* features) {
  if (written_ >= info_.count)
    throw Error(fmt::format("{}: more records appended than the {} announced", path_, info_.count));
  const size_t tb = size_t(info_.target_bytes());
  if (tb) std::memcpy(record_.data(), target, tb);
  std::memcpy(record_.data() + tb, features, record_.size() - tb);
  if (!hist_.empty())
    for (size_t i = tb; i < record_.size(); ++i) ++hist_[record_[i]];
  chunk_crc_ = core::crc32c(record_.data(), record_.size(), chunk_crc_);
  if (std::fwrite(record_.data(), 1, record_.size(), out_->file()) != record_.size())
    throw InputError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  ++written_;
  if (written_ % info_.chunk_records == 0 || written_ == info_.count) end_chunk();
}

void ShardWriter::end_chunk() {
  crcs_.push_back(chunk_crc_);
  chunk_crc_ = 0;
}

void ShardWriter::finish() {
  if (written_ != info_.count)
    throw Error(fmt::format("{}: {} records appended, {} announced", path_, written_, info_.count));
  if (!hist_.empty()) {
    Normalisation norm = histogram_statistics(hist_.data());
    info_.mean = norm.mean;
    info_.stddev = norm.stddev;
  }
  ShardHeader h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = kShardVersion;
  h.data_offset = uint32_t(info_.data_offset);
  h.dtype = uint8_t(info_.dtype);
  h.ndims = uint8_t(info_.shape.size());
  h.target = uint8_t(info_.target);
  h.target_numel = uint32_t(info_.target_numel);
  h.extra_bytes = uint32_t(extra_.size());
  h.extra_crc = extra_.empty() ? 0 : core::crc32c(extra_.data(), extra_.size());
  h.num_classes = uint32_t(info_.num_classes);
  h.count = uint64_t(info_.count);
  h.record_bytes = uint64_t(info_.record_bytes);
  h.chunk_records = uint64_t(info_.chunk_records);
  h.num_chunks = uint64_t(info_.num_chunks);
  for (size_t i = 0; i < info_.shape.size(); ++i) h.shape[i] = info_.shape[i];
  h.mean = info_.mean;
  h.stddev = info_.stddev;
  h.table_crc = core::crc32c(crcs_.data(), crcs_.size() * 4);
  h.header_crc = core::crc32c(&h, offsetof(ShardHeader, header_crc));
  std::FILE* f = out_->file();
  const bool ok =
      std::fseek(f, 0, SEEK_SET) == 0 && std::fwrite(&h, sizeof h, 1, f) == 1 &&
      (crcs_.empty() || std::fwrite(crcs_.data(), 4, crcs_.size(), f) == crcs_.size()) &&
      (extra_.empty() || std::fwrite(extra_.data(), 1, extra_.size(), f) == extra_.size());
  if (!ok) throw InputError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  out_->commit();
  out_.reset();
}

}  // namespace loom::data
