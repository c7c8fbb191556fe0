#include "loom/train/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/core/io/crc32c.h"

namespace loom::train {

namespace fs = std::filesystem;

const char* section_type_name(SectionType t) {
  switch (t) {
    case SectionType::kF32:
      return "f32";
    case SectionType::kF64:
      return "f64";
    case SectionType::kI64:
      return "i64";
    case SectionType::kBytes:
      return "bytes";
    case SectionType::kText:
      return "text";
  }
  return "?";
}

size_t section_type_size(SectionType t) {
  switch (t) {
    case SectionType::kF32:
      return 4;
    case SectionType::kF64:
      return 8;
    case SectionType::kI64:
      return 8;
    case SectionType::kBytes:
      return 1;
    case SectionType::kText:
      return 1;
  }
  return 0;
}

namespace {

bool valid_type(uint8_t t) {
  return t >= 1 && t <= 5;
}

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Bounds-checked little-endian reader over the file's bytes.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, const std::string& src) : b_(b), src_(src) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }
  template <typename T>
  T get(const char* what) {
    if (left() < sizeof(T))
      throw InputError(
          fmt::format("{}: checkpoint truncated at byte {} (reading {})", src_, pos_, what));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> take(size_t n) {
    std::span<const uint8_t> s = b_.subspan(pos_, n);  // callers checked n <= left()
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& src_;
  size_t pos_ = 0;
};

std::atomic<int64_t> g_write_limit{-2};  // -2: not read from the environment yet
std::atomic<int64_t> g_written{0};

int64_t write_limit() {
  int64_t v = g_write_limit.load();
  if (v == -2) {
    const char* e = std::getenv("LOOM_CHECKPOINT_FAIL_AFTER_BYTES");
    v = e ? std::strtoll(e, nullptr, 10) : -1;
    g_write_limit.store(v);
  }
  return v;
}

}  // namespace

void CheckpointFile::put(const std::string& name, SectionType type, const void* data,
                         size_t bytes) {
  LOOM_CHECK(!name.empty() && name.size() <= kMaxSectionName, "section name '{}'", name);
  Section s;
  s.type = type;
  s.data.resize(bytes);
  if (bytes) std::memcpy(s.data.data(), data, bytes);
  sections_[name] = std::move(s);
}

void CheckpointFile::put_f32(const std::string& n, std::span<const float> v) {
  put(n, SectionType::kF32, v.data(), v.size_bytes());
}
void CheckpointFile::put_f64(const std::string& n, std::span<const double> v) {
  put(n, SectionType::kF64, v.data(), v.size_bytes());
}
void CheckpointFile::put_i64(const std::string& n, std::span<const int64_t> v) {
  put(n, SectionType::kI64, v.data(), v.size_bytes());
}
void CheckpointFile::put_bytes(const std::string& n, std::span<const uint8_t> v) {
  put(n, SectionType::kBytes, v.data(), v.size_bytes());
}
void CheckpointFile::put_text(const std::string& n, const std::string& text) {
  put(n, SectionType::kText, text.data(), text.size());
}

const Section& CheckpointFile::need(const std::string& name, SectionType type,
                                    int64_t expect) const {
  auto it = sections_.find(name);
  if (it == sections_.end())
    throw InputError(fmt::format("{}: checkpoint has no section '{}'", source_, name));
  const Section& s = it->second;
  if (s.type != type)
    throw InputError(fmt::format("{}: section '{}' is {}, expected {}", source_, name,
                                 section_type_name(s.type), section_type_name(type)));
  if (expect >= 0 && s.count() != expect)
    throw InputError(
        fmt::format("{}: section '{}' holds {} elements, this run needs {} (another "
                    "model, optimizer or world size?)",
                    source_, name, s.count(), expect));
  return s;
}

template <typename T>
static std::vector<T> as_vector(const Section& s) {
  std::vector<T> v(s.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data.data(), v.size() * sizeof(T));
  return v;
}

std::vector<float> CheckpointFile::f32(const std::string& n, int64_t e) const {
  return as_vector<float>(need(n, SectionType::kF32, e));
}
std::vector<double> CheckpointFile::f64(const std::string& n, int64_t e) const {
  return as_vector<double>(need(n, SectionType::kF64, e));
}
std::vector<int64_t> CheckpointFile::i64(const std::string& n, int64_t e) const {
  return as_vector<int64_t>(need(n, SectionType::kI64, e));
}
std::vector<uint8_t> CheckpointFile::bytes(const std::string& n, int64_t e) const {
  return need(n, SectionType::kBytes, e).data;
}
std::string CheckpointFile::text(const std::string& n) const {
  const Section& s = need(n, SectionType::kText, -1);
  return std::string(s.data.begin(), s.data.end());
}
void CheckpointFile::copy_f32(const std::string& n, float* dst, int64_t count) const {
  const Section& s = need(n, SectionType::kF32, count);
  if (count > 0) std::memcpy(dst, s.data.data(), size_t(count) * sizeof(float));
}

std::vector<uint8_t> CheckpointFile::serialize() const {
  size_t total = 16 + 16;
  for (const auto& [name, s] : sections_) total += 16 + name.size() + s.data.size();
  std::vector<uint8_t> out;
  out.reserve(total);
  for (size_t i = 0; i < 8; ++i) out.push_back(uint8_t(kCheckpointMagic[i]));
  append<uint32_t>(out, kCheckpointVersion);
  append<uint32_t>(out, uint32_t(sections_.size()));
  for (const auto& [name, s] : sections_) {
    append<uint16_t>(out, uint16_t(name.size()));
    out.insert(out.end(), name.begin(), name.end());
    append<uint8_t>(out, uint8_t(s.type));
    append<uint8_t>(out, 0);
    append<uint32_t>(out, core::crc32c(s.data.data(), s.data.size()));
    append<uint64_t>(out, uint64_t(s.count()));
    out.insert(out.end(), s.data.begin(), s.data.end());
  }
  const uint32_t crc = core::crc32c(out.data(), out.size());
  out.insert(out.end(), kCheckpointEnd, kCheckpointEnd + 8);
  append<uint32_t>(out, crc);
  append<uint32_t>(out, 0);
  return out;
}

CheckpointFile CheckpointFile::parse(std::span<const uint8_t> bytes, const std::string& source) {
  CheckpointFile f;
  f.source_ = source;
  Cursor c(bytes, source);
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kCheckpointMagic, 8) != 0)
    throw InputError(fmt::format("{}: not a loom checkpoint (no LOOMCKPT magic)", source));
  c.take(8);
  const uint32_t version = c.get<uint32_t>("the version");
  if (version != kCheckpointVersion)
    throw InputError(fmt::format("{}: checkpoint format version {}; this build reads version {}",
                                 source, version, kCheckpointVersion));
  const uint32_t count = c.get<uint32_t>("the section count");
  // Each section takes at least 16 bytes, so the count is bounded by the file's size.
  if (count > c.left() / 16)
    throw InputError(
        fmt::format("{}: header claims {} sections, more than the {} bytes left "
                    "can hold",
                    source, count, c.left()));
  for (uint32_t i = 0; i < count; ++i) {
    const uint16_t len = c.get<uint16_t>("a section name length");
    if (len == 0 || len > kMaxSectionName || len > c.left())
      throw InputError(fmt::format("{}: section {} has a name of {} bytes (1..{} allowed, {} left)",
                                   source, i, len, kMaxSectionName, c.left()));
    std::span<const uint8_t> nb = c.take(len);
    std::string name(nb.begin(), nb.end());
    for (char ch : name)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'))
        throw InputError(
            fmt::format("{}: section {} has a name with a byte 0x{:02x} outside "
                        "[A-Za-z0-9._-]",
                        source, i, uint8_t(ch)));
    const uint8_t type = c.get<uint8_t>("a section type");
    if (!valid_type(type))
      throw InputError(fmt::format("{}: section '{}' has unknown type {}", source, name, type));
    const SectionType t = SectionType(type);
    if (c.get<uint8_t>("a reserved byte") != 0)
      throw InputError(fmt::format("{}: section '{}' has a non-zero reserved byte", source, name));
    const uint32_t crc = c.get<uint32_t>("a section CRC");
    const uint64_t n = c.get<uint64_t>("a section length");
    const size_t esize = section_type_size(t);
    if (n > c.left() / esize)
      throw InputError(fmt::format(
          "{}: section '{}' claims {} {} elements ({} bytes) but only {} "
          "bytes remain in the file",
          source, name, n, section_type_name(t),
          n > UINT64_MAX / esize ? std::string("over 2^64") : std::to_string(n * esize), c.left()));
    std::span<const uint8_t> payload = c.take(size_t(n) * esize);
    const uint32_t got = core::crc32c(payload.data(), payload.size());
    if (got != crc)
      throw InputError(
          fmt::format("{}: section '{}' fails its CRC32C (stored {:08x}, computed "
                      "{:08x}): the file is corrupt",
                      source, name, crc, got));
    if (f.sections_.count(name))
      throw InputError(fmt::format("{}: section '{}' appears twice", source, name));
    Section s;
    s.type = t;
    s.data.assign(payload.begin(), payload.end());
    f.sections_.emplace(std::move(name), std::move(s));
  }
  const size_t body = c.pos();
  if (c.left() < 16 || std::memcmp(bytes.data() + body, kCheckpointEnd, 8) != 0)
    throw InputError(
        fmt::format("{}: checkpoint truncated: no end marker after {} sections "
                    "(byte {} of {})",
                    source, count, body, bytes.size()));
  c.take(8);
  const uint32_t crc = c.get<uint32_t>("the file CRC");
  const uint32_t got = core::crc32c(bytes.data(), body);
  if (crc != got)
    throw InputError(
        fmt::format("{}: checkpoint header fails its CRC32C (stored {:08x}, "
                    "computed {:08x}): the file is corrupt",
                    source, crc, got));
  // The last word is reserved and written as zero (docs/checkpoint.md); anything else is not a
  // file this build wrote. (Found by fuzz.checkpoint: a non-zero word parsed and then did not
  // serialize back to the same bytes.)
  const uint32_t trailer = c.get<uint32_t>("the trailer");
  if (trailer != 0)
    throw InputError(fmt::format("{}: reserved trailer word is {:#x}, not 0", source, trailer));
  if (c.left() != 0)
    throw InputError(fmt::format("{}: {} bytes after the end marker", source, c.left()));
  return f;
}

CheckpointFile CheckpointFile::read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(fmt::format("{}: cannot open checkpoint: {}", path, std::strerror(errno)));
  struct stat st {};
  std::vector<uint8_t> bytes;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.resize(size_t(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  ::close(fd);
  bytes.resize(got);
  return parse(bytes, path);
}

void write_checkpoint_file(const std::string& path, std::span<const uint8_t> bytes) {
  const int64_t limit = write_limit();
  if (limit >= 0) {
    // What a full disk does part-way through: the write fails, and the temporary goes.
    const int64_t before = g_written.fetch_add(int64_t(bytes.size()));
    if (before + int64_t(bytes.size()) > limit)
      throw InputError(
          fmt::format("{}: cannot write {} bytes: {}", path, bytes.size(), std::strerror(ENOSPC)));
  }
  core::write_file_atomically(path, bytes);
}

void set_checkpoint_write_limit(int64_t bytes) {
  g_write_limit.store(bytes < 0 ? -1 : bytes);
  g_written.store(0);
}

}  // namespace loom::train
