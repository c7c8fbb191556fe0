#include "loom/data/sources/shard_source.h"

#include <cstring>

#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"

namespace loom::data {

ShardSource::ShardSource(const std::string& path, ShardOpenOptions opts)
    : ShardSource(core::MappedFile(path), opts) {}

ShardSource::ShardSource(core::MappedFile file, ShardOpenOptions opts)
    : file_(std::move(file)), verify_(opts.verify) {
  info_ = parse_shard_header(file_.data(), file_.size(), file_.size(), file_.path(), &crcs_);
  if (info_.target == ShardTarget::kNone)
    throw InputError(
        fmt::format("{}: a token stream (records without targets) is sequence data, not samples",
                    file_.path()));
  norm_ = opts.norm ? *opts.norm : Normalisation{info_.mean, info_.stddev};
  affine_ = byte_affine(norm_);
  verified_ = std::make_unique<std::atomic<uint8_t>[]>(size_t(info_.num_chunks));
  for (int64_t c = 0; c < info_.num_chunks; ++c) verified_[size_t(c)] = 0;
  if (verify_ == ShardVerify::kAll)
    for (int64_t c = 0; c < info_.num_chunks; ++c) verify_chunk(c);
}

const uint8_t* ShardSource::record(int64_t i) const {
  return file_.data() + info_.data_offset + i * info_.record_bytes;
}

void ShardSource::verify_chunk(int64_t c) const {
  const int64_t first = c * info_.chunk_records;
  const int64_t last = std::min(info_.count, first + info_.chunk_records);
  uint32_t crc = core::crc32c(record(first), size_t((last - first) * info_.record_bytes));
  if (crc != crcs_[size_t(c)])
    throw InputError(
        fmt::format("{}: CRC mismatch in chunk {} (records {}..{}): stored {:08x}, computed {:08x}",
                    file_.path(), c, first, last - 1, crcs_[size_t(c)], crc));
  verified_[size_t(c)].store(1, std::memory_order_release);
}

std::vector<int64_t> ShardSource::bad_chunks() const {
  std::vector<int64_t> bad;
  for (int64_t c = 0; c < info_.num_chunks; ++c) {
    try {
      verify_chunk(c);
    } catch (const InputError&) {
      bad.push_back(c);
    }
  }
  return bad;
}

void ShardSource::ensure_verified(int64_t i) const {
  const int64_t c = i / info_.chunk_records;
  // Two threads may both check a chunk the first time; that is harmless.
  if (!verified_[size_t(c)].load(std::memory_order_acquire)) verify_chunk(c);
}

void ShardSource::gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const {
  constexpr int64_t kAhead = 4;  // 2..12 measured alike here
  const int64_t numel = info_.numel();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx[k];
    if (i < 0 || i >= info_.count)
      throw Error(
          fmt::format("{}: record {} requested, the shard has {}", file_.path(), i, info_.count));
    if (verify_ == ShardVerify::kLazy) ensure_verified(i);
    if (k + kAhead < n && idx[k + kAhead] >= 0 && idx[k + kAhead] < info_.count) {
      // Shuffled reads jump around the mapping: ask for a record kAhead ahead while this one is
      // decoded, hiding most of the cache and TLB misses.
      const uint8_t* ahead = record(idx[k + kAhead]);
      for (int64_t off = 0; off < info_.record_bytes; off += 64) __builtin_prefetch(ahead + off);
    }
    const uint8_t* r = record(i);
    if (info_.target == ShardTarget::kClassLabel) {
      int32_t label;
      std::memcpy(&label, r, 4);
      if (label < 0 || label >= info_.num_classes)
        throw InputError(fmt::format("{}: record {}: label {} is outside [0, {})", file_.path(), i,
                                     label, info_.num_classes));
      y[k] = label;
    } else {
      y[k] = 0;
    }
    float* out = x + k * numel;
    const uint8_t* px = r + info_.target_bytes();
    if (info_.dtype == ShardDtype::kUint8) {
      // normalise_byte() as in the IDX path's table: the same bits, vectorised (8 lanes of
      // convert + FMA) instead of a table load per byte.
      for (int64_t j = 0; j < numel; ++j) out[j] = normalise_byte(px[j], affine_);
    } else if (info_.dtype == ShardDtype::kUint16) {
      for (int64_t j = 0; j < numel; ++j) {
        uint16_t v;
        std::memcpy(&v, px + 2 * j, 2);
        out[j] = float(v);
      }
    } else {
      std::memcpy(out, px, size_t(numel) * 4);
    }
  }
}

void ShardSource::gather_targets(const int64_t* idx, int64_t n, float* t) const {
  if (info_.target != ShardTarget::kFloat) SampleSource::gather_targets(idx, n, t);
  const int64_t k = info_.target_numel;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t i = idx[j];
    if (i < 0 || i >= info_.count)
      throw Error(
          fmt::format("{}: record {} requested, the shard has {}", file_.path(), i, info_.count));
    if (verify_ == ShardVerify::kLazy) ensure_verified(i);
    std::memcpy(t + j * k, record(i), size_t(k) * 4);
  }
}

void ShardSource::will_need(int64_t first, int64_t last) const {
  file_.advise_willneed(size_t(info_.data_offset + first * info_.record_bytes),
                        size_t((last - first) * info_.record_bytes));
}

void ShardSource::release(int64_t first, int64_t last) const {
  file_.advise_dontneed(size_t(info_.data_offset + first * info_.record_bytes),
                        size_t((last - first) * info_.record_bytes));
}

}  // namespace loom::data
