// The checkpoint file format (docs/checkpoint.md): a magic, a version and a list of typed,
// named sections, each with its own CRC32C, then an end marker. Reading never executes
// anything from the file (unlike pickle) and never allocates more than the file holds: every
// length is checked against the bytes that remain before anything is allocated, so a header
// that claims 10^12 floats in a 1 MB file is an InputError naming the file and the section.
//
// Layout (little-endian):
//   "LOOMCKPT" u32 version(=1) u32 section_count
//   section_count x { u16 name_len, name, u8 dtype, u8 0, u32 crc32c(payload), u64 count,
//                     payload: count * dtype_size bytes }
//   "LOOMEND." u32 crc32c(all bytes before this marker) u32 0
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

enum class SectionType : uint8_t { kF32 = 1, kF64 = 2, kI64 = 3, kBytes = 4, kText = 5 };

inline constexpr char kCheckpointMagic[9] = "LOOMCKPT";
inline constexpr char kCheckpointEnd[9] = "LOOMEND.";
inline constexpr uint32_t kCheckpointVersion = 1;
inline constexpr size_t kMaxSectionName = 255;

const char* section_type_name(SectionType t);
size_t section_type_size(SectionType t);

struct Section {
  SectionType type = SectionType::kBytes;
  std::vector<uint8_t> data;  // count * section_type_size(type) bytes
  int64_t count() const { return int64_t(data.size() / section_type_size(type)); }
};

// A checkpoint file in memory: named sections, in name order.
class CheckpointFile {
 public:
  void put_f32(const std::string& name, std::span<const float> v);
  void put_f64(const std::string& name, std::span<const double> v);
  void put_i64(const std::string& name, std::span<const int64_t> v);
  void put_bytes(const std::string& name, std::span<const uint8_t> v);
  void put_text(const std::string& name, const std::string& text);

  bool has(const std::string& name) const { return sections_.count(name) != 0; }
  // Typed getters: InputError naming `source` and the section when it is missing, of another
  // type, or (expect >= 0) not exactly `expect` elements long.
  std::vector<float> f32(const std::string& name, int64_t expect = -1) const;
  std::vector<double> f64(const std::string& name, int64_t expect = -1) const;
  std::vector<int64_t> i64(const std::string& name, int64_t expect = -1) const;
  std::vector<uint8_t> bytes(const std::string& name, int64_t expect = -1) const;
  std::string text(const std::string& name) const;
  // Copies a kF32 section of exactly n elements into dst (no intermediate vector).
  void copy_f32(const std::string& name, float* dst, int64_t n) const;

  const std::map<std::string, Section>& sections() const { return sections_; }
  const std::string& source() const { return source_; }

  // The file's bytes.
  std::vector<uint8_t> serialize() const;
  // Parses bytes; `source` (a path) is named in every error. InputError on anything malformed.
  static CheckpointFile parse(std::span<const uint8_t> bytes, const std::string& source);
  // Reads and parses a file (InputError if unreadable).
  static CheckpointFile read(const std::string& path);

 private:
  const Section& need(const std::string& name, SectionType type, int64_t expect) const;
  void put(const std::string& name, SectionType type, const void* data, size_t bytes);
  std::map<std::string, Section> sections_;
  std::string source_ = "<memory>";
};

// Writes one file of a checkpoint (or the weights beside it) through core::write_file_atomically,
// counting its bytes against the test hook below, so that a test can fill the disk between two
// checkpoints without touching the run's other files.
void write_checkpoint_file(const std::string& path, std::span<const uint8_t> bytes);

// Test hook: checkpoint writes fail with ENOSPC once this many bytes have been written in this
// process (negative = never). Also set by the environment variable
// LOOM_CHECKPOINT_FAIL_AFTER_BYTES.
void set_checkpoint_write_limit(int64_t bytes);

}  // namespace loom::train
