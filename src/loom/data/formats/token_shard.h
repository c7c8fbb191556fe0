// Token streams: a shard whose records are single tokens (ShardTarget::kNone), its vocabulary
// in the shard's extra section, and `loom data convert --text`. docs/data.md ("Token shards")
// describes the vocabulary section byte by byte.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/shard_format.h"

namespace loom::data {

// What a token id stands for, which names the unit of bits per token in every output.
enum class VocabKind : uint8_t {
  kIds = 0,    // no vocabulary section: ids without a text meaning ("bits per token")
  kBytes = 1,  // token = a byte of the text, 256 ids ("bits per byte")
  kChars = 2,  // token = a Unicode character of UTF-8 text ("bits per character")
};
const char* vocab_kind_name(VocabKind k);  // "ids", "bytes", "chars"
// "token", "byte", "character": what one token is, for "bits per <unit>".
const char* vocab_unit(VocabKind k);

// The vocabulary section's header version; a reader refuses another one naming the file.
constexpr uint32_t kVocabVersion = 1;

struct Vocabulary {
  VocabKind kind = VocabKind::kBytes;
  int64_t size = 256;
  // kChars: each token's character as UTF-8, in id order (ascending code points).
  std::vector<std::string> chars;
  // FNV-1a 64 of the kind, size and characters: two runs train on the same vocabulary when
  // their fingerprints agree (a checkpoint records it). Never 0.
  uint64_t fingerprint() const;
  std::string describe() const;  // "bytes (256 tokens)", "chars (74 tokens)"
};

// The extra section: "LVOC" u32 version, u8 kind, u8[3] 0, u32 size, then (chars) the
// concatenated UTF-8 of every character in id order.
std::vector<uint8_t> encode_vocabulary(const Vocabulary& v);
// InputError naming `name` for a wrong magic or version, a size that disagrees with the
// shard's class count, or characters that are not distinct ascending UTF-8 code points.
Vocabulary decode_vocabulary(const uint8_t* data, size_t n, int64_t num_classes,
                             const std::string& name);

// A token shard opened for reading: every chunk's CRC is checked at open (a stream is read in
// full every epoch; a bad byte is an error before training, not in the middle of it).
class TokenShard {
 public:
  // verify = false: no CRC check at open (`loom data inspect` reports bad chunks instead).
  explicit TokenShard(const std::string& path, bool verify = true);
  // Over a file already mapped (or MappedFile::borrow'ed bytes).
  TokenShard(core::MappedFile file, bool verify);
  int64_t size() const { return info_.count; }  // tokens
  const Vocabulary& vocabulary() const { return vocab_; }
  const ShardInfo& info() const { return info_; }
  const std::string& path() const { return file_.path(); }
  int32_t token(int64_t i) const {
    const uint8_t* p = file_.data() + info_.data_offset;
    return info_.dtype == ShardDtype::kUint8
               ? int32_t(p[i])
               : int32_t(uint16_t(p[2 * i] | (uint16_t(p[2 * i + 1]) << 8)));
  }
  // Chunks whose CRC does not match (for `loom data inspect`).
  std::vector<int64_t> bad_chunks() const;

 private:
  core::MappedFile file_;
  ShardInfo info_;
  std::vector<uint32_t> crcs_;
  Vocabulary vocab_;
};

// True when `path` is a shard of target kNone (a token stream); false for any other file.
bool is_token_shard(const std::string& path);

// --vocab for `loom data convert --text`.
enum class TextVocab { kBytes, kChars };

// Writes the bytes of a text file as a token stream: byte tokens (uint8, vocabulary 256), or the
// distinct UTF-8 characters sorted by code point (uint8 up to 256 of them, else uint16; at most
// 65536). InputError naming the file for an empty file, and (chars) for text that is not UTF-8,
// naming the byte offset of the first bad sequence.
ShardInfo convert_text(const std::string& src, const std::string& dst, TextVocab vocab,
                       int64_t chunk_records = 0);

// The offset of the first byte that does not start or continue a valid UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF are invalid), or -1.
int64_t first_invalid_utf8(const uint8_t* d, size_t n);

}  // namespace loom::data
