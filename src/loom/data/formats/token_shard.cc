#include "loom/data/formats/token_shard.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"
#include "loom/data/formats/shard_writer.h"

namespace loom::data {

const char* vocab_kind_name(VocabKind k) {
  switch (k) {
    case VocabKind::kIds:
      return "ids";
    case VocabKind::kBytes:
      return "bytes";
    case VocabKind::kChars:
      return "chars";
  }
  return "?";
}

const char* vocab_unit(VocabKind k) {
  switch (k) {
    case VocabKind::kIds:
      return "token";
    case VocabKind::kBytes:
      return "byte";
    case VocabKind::kChars:
      return "character";
  }
  return "token";
}

namespace {

constexpr char kVocabMagic[4] = {'L', 'V', 'O', 'C'};
constexpr size_t kVocabHeader = 16;

uint64_t fnv(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The length of the UTF-8 sequence at d[0..n), or 0 when it is not a valid one (RFC 3629:
// shortest form only, no surrogates, nothing past U+10FFFF).
size_t utf8_length(const uint8_t* d, size_t n) {
  const uint8_t b = d[0];
  if (b < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if (b >= 0xc2 && b <= 0xdf) {
    len = 2;
    cp = b & 0x1f;
  } else if (b >= 0xe0 && b <= 0xef) {
    len = 3;
    cp = b & 0x0f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    len = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((d[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d[i] & 0x3f);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

}  // namespace

int64_t first_invalid_utf8(const uint8_t* d, size_t n) {
  size_t i = 0;
  while (i < n) {
    const size_t len = utf8_length(d + i, n - i);
    if (len == 0) return int64_t(i);
    i += len;
  }
  return -1;
}

uint64_t Vocabulary::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;
  const uint8_t k = uint8_t(kind);
  h = fnv(&k, 1, h);
  h = fnv(&size, sizeof size, h);
  for (const std::string& c : chars) h = fnv(c.data(), c.size(), h);
  return h == 0 ? 1 : h;
}

std::string Vocabulary::describe() const {
  return fmt::format("{} ({} tokens)", vocab_kind_name(kind), size);
}

std::vector<uint8_t> encode_vocabulary(const Vocabulary& v) {
  std::vector<uint8_t> out(kVocabHeader, 0);
  std::memcpy(out.data(), kVocabMagic, 4);
  const uint32_t version = kVocabVersion, size = uint32_t(v.size);
  std::memcpy(out.data() + 4, &version, 4);
  out[8] = uint8_t(v.kind);
  std::memcpy(out.data() + 12, &size, 4);
  for (const std::string& c : v.chars) out.insert(out.end(), c.begin(), c.end());
  return out;
}

Vocabulary decode_vocabulary(const uint8_t* data, size_t n, int64_t num_classes,
                             const std::string& name) {
  Vocabulary v;
  if (n == 0) {  // no section: ids whose text meaning the shard does not say
    v.kind = VocabKind::kIds;
    v.size = num_classes;
    return v;
  }
  if (n < kVocabHeader || std::memcmp(data, kVocabMagic, 4) != 0)
    throw InputError(
        fmt::format("{}: the extra section is not a vocabulary (expected \"LVOC\")", name));
  uint32_t version, size;
  std::memcpy(&version, data + 4, 4);
  std::memcpy(&size, data + 12, 4);
  if (version != kVocabVersion)
    throw InputError(fmt::format("{}: vocabulary section version {} (this loom reads version {})",
                                 name, version, kVocabVersion));
  if (data[8] != uint8_t(VocabKind::kBytes) && data[8] != uint8_t(VocabKind::kChars))
    throw InputError(fmt::format("{}: unknown vocabulary kind code {}", name, data[8]));
  v.kind = VocabKind(data[8]);
  v.size = size;
  if (v.size != num_classes)
    throw InputError(fmt::format("{}: the vocabulary has {} tokens, the header says {}", name,
                                 v.size, num_classes));
  if (v.kind == VocabKind::kBytes) {
    if (v.size != 256 || n != kVocabHeader)
      throw InputError(fmt::format(
          "{}: a byte vocabulary has 256 tokens and no characters ({} tokens, {} bytes)", name,
          v.size, n - kVocabHeader));
    return v;
  }
  size_t i = kVocabHeader;
  while (i < n) {
    const size_t len = utf8_length(data + i, n - i);
    if (len == 0)
      throw InputError(fmt::format("{}: vocabulary byte {}: not UTF-8", name, i - kVocabHeader));
    std::string c(reinterpret_cast<const char*>(data + i), len);
    if (!v.chars.empty() && !(v.chars.back() < c))
      throw InputError(
          fmt::format("{}: vocabulary token {}: characters must be distinct and ascending", name,
                      v.chars.size()));
    v.chars.push_back(std::move(c));
    i += len;
  }
  if (int64_t(v.chars.size()) != v.size)
    throw InputError(fmt::format("{}: the vocabulary lists {} characters, its header says {}", name,
                                 v.chars.size(), v.size));
  return v;
}

TokenShard::TokenShard(const std::string& path, bool verify)
    : TokenShard(core::MappedFile(path), verify) {}

TokenShard::TokenShard(core::MappedFile file, bool verify) : file_(std::move(file)) {
  const std::string& path = file_.path();
  info_ = parse_shard_header(file_.data(), file_.size(), file_.size(), file_.path(), &crcs_);
  if (info_.target != ShardTarget::kNone)
    throw InputError(
        fmt::format("{}: a shard of {}, not a token stream (convert text with "
                    "`loom data convert --text FILE DST`)",
                    path, target_name(info_.target)));
  if (info_.numel() != 1 ||
      (info_.dtype != ShardDtype::kUint8 && info_.dtype != ShardDtype::kUint16))
    throw InputError(fmt::format(
        "{}: a token stream holds one uint8 or uint16 token per record, this has {} {} values",
        path, info_.numel(), dtype_name(info_.dtype)));
  if (info_.num_classes > (info_.dtype == ShardDtype::kUint8 ? 256 : 65536))
    throw InputError(fmt::format("{}: a vocabulary of {} tokens in {} ids", path, info_.num_classes,
                                 dtype_name(info_.dtype)));
  vocab_ = decode_vocabulary(file_.data() + info_.extra_offset, size_t(info_.extra_bytes),
                             info_.num_classes, path);
  if (verify) {
    const std::vector<int64_t> bad = bad_chunks();
    if (!bad.empty())
      throw InputError(fmt::format("{}: CRC mismatch in chunk {} (tokens {}..{})", path, bad[0],
                                   bad[0] * info_.chunk_records,
                                   std::min(info_.count, (bad[0] + 1) * info_.chunk_records) - 1));
  }
  for (int64_t i = 0; verify && i < info_.count; ++i)
    if (token(i) >= info_.num_classes)
      throw InputError(fmt::format("{}: token {} is {}, outside the vocabulary of {}", path, i,
                                   token(i), info_.num_classes));
}

std::vector<int64_t> TokenShard::bad_chunks() const {
  std::vector<int64_t> bad;
  const uint8_t* base = file_.data() + info_.data_offset;
  for (int64_t c = 0; c < info_.num_chunks; ++c) {
    const int64_t first = c * info_.chunk_records;
    const int64_t last = std::min(info_.count, first + info_.chunk_records);
    if (core::crc32c(base + first * info_.record_bytes,
                     size_t((last - first) * info_.record_bytes)) != crcs_[size_t(c)])
      bad.push_back(c);
  }
  return bad;
}

bool is_token_shard(const std::string& path) {
  core::MappedFile f(path);
  if (f.size() < sizeof(ShardHeader) || std::memcmp(f.data(), kShardMagic, 8) != 0) return false;
  uint32_t version;
  std::memcpy(&version, f.data() + 8, 4);
  return version >= 2 && f.data()[offsetof(ShardHeader, target)] == uint8_t(ShardTarget::kNone);
}

ShardInfo convert_text(const std::string& src, const std::string& dst, TextVocab vocab,
                       int64_t chunk_records) {
  core::MappedFile f(src);
  const uint8_t* d = f.data();
  const size_t n = f.size();
  if (n == 0) throw InputError(fmt::format("{}: an empty file holds no tokens", src));
  Vocabulary v;
  ShardSpec spec;
  spec.shape = {1};
  spec.count = int64_t(n);
  spec.chunk_records = chunk_records;
  spec.target = ShardTarget::kNone;
  if (vocab == TextVocab::kBytes) {
    v.kind = VocabKind::kBytes;
    v.size = 256;
    spec.dtype = ShardDtype::kUint8;
    spec.num_classes = 256;
    spec.extra = encode_vocabulary(v);
    ShardWriter w(dst, spec);
    for (size_t i = 0; i < n; ++i) w.append_features(d + i);
    w.finish();
    return w.info();
  }
  const int64_t bad = first_invalid_utf8(d, n);
  if (bad >= 0)
    throw InputError(
        fmt::format("{}: not UTF-8 at byte offset {} (byte 0x{:02x}); --vocab bytes reads any file",
                    src, bad, d[bad]));
  std::set<std::string> distinct;
  int64_t count = 0;
  for (size_t i = 0; i < n; ++count) {
    const size_t len = utf8_length(d + i, n - i);
    distinct.emplace(reinterpret_cast<const char*>(d + i), len);
    i += len;
  }
  if (distinct.size() > 65536)
    throw InputError(
        fmt::format("{}: {} distinct characters; a character vocabulary holds at "
                    "most 65536 (use --vocab bytes)",
                    src, distinct.size()));
  // std::string orders bytes as unsigned chars: UTF-8 byte order is code point order.
  v.kind = VocabKind::kChars;
  v.chars.assign(distinct.begin(), distinct.end());
  v.size = int64_t(v.chars.size());
  spec.dtype = v.size <= 256 ? ShardDtype::kUint8 : ShardDtype::kUint16;
  spec.num_classes = int(v.size);
  spec.count = count;
  spec.extra = encode_vocabulary(v);
  ShardWriter w(dst, spec);
  for (size_t i = 0; i < n;) {
    const size_t len = utf8_length(d + i, n - i);
    const std::string c(reinterpret_cast<const char*>(d + i), len);
    const auto id = uint16_t(std::lower_bound(v.chars.begin(), v.chars.end(), c) - v.chars.begin());
    if (spec.dtype == ShardDtype::kUint8) {
      const uint8_t b = uint8_t(id);
      w.append_features(&b);
    } else {
      const uint8_t le[2] = {uint8_t(id & 0xff), uint8_t(id >> 8)};
      w.append_features(le);
    }
    i += len;
  }
  w.finish();
  return w.info();
}

}  // namespace loom::data
