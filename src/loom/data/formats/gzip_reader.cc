#include "loom/data/formats/gzip_reader.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "loom/core/error.h"

namespace loom::data {

bool has_gzip_magic(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

MaybeGzipReader::MaybeGzipReader(const uint8_t* data, size_t size, std::string name)
    : data_(data), size_(size), name_(std::move(name)), gzip_(has_gzip_magic(data, size)) {
  if (!gzip_) return;
  // 16 + MAX_WBITS: expect a gzip header and trailer (RFC 1952), not a zlib one.
  if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) throw Error("zlib: inflateInit2 failed");
  zs_.next_in = const_cast<Bytef*>(data_);
  zs_.avail_in = static_cast<uInt>(std::min<size_t>(size_, UINT_MAX));
  pos_ = zs_.avail_in;
}

MaybeGzipReader::~MaybeGzipReader() {
  if (gzip_) inflateEnd(&zs_);
}

size_t MaybeGzipReader::read(uint8_t* dst, size_t n) {
  if (!gzip_) {
    size_t k = std::min(n, size_ - pos_);
    if (k) std::memcpy(dst, data_ + pos_, k);
    pos_ += k;
    produced_ += k;
    return k;
  }
  size_t done = 0;
  while (done < n && !stream_end_) {
    if (zs_.avail_in == 0 && pos_ < size_) {  // inputs over 4 GiB are fed in pieces
      size_t k = std::min<size_t>(size_ - pos_, UINT_MAX);
      zs_.next_in = const_cast<Bytef*>(data_ + pos_);
      zs_.avail_in = static_cast<uInt>(k);
      pos_ += k;
    }
    size_t want = std::min<size_t>(n - done, UINT_MAX);
    zs_.next_out = dst + done;
    zs_.avail_out = static_cast<uInt>(want);
    int rc = inflate(&zs_, Z_NO_FLUSH);
    done += want - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members (RFC 1952 2.2) are one stream; anything else ends it.
      size_t left = zs_.avail_in + (size_ - pos_);
      if (left >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b) {
        inflateReset(&zs_);
        continue;
      }
      stream_end_ = true;
    } else if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && pos_ >= size_) {
      throw InputError(fmt::format("{}: truncated gzip stream (ends after {} decompressed bytes)",
                                   name_, produced_ + done));
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      throw InputError(fmt::format("{}: garbled gzip data ({}) after {} decompressed bytes", name_,
                                   zs_.msg ? zs_.msg : "zlib error", produced_ + done));
    }
  }
  produced_ += done;
  return done;
}

}  // namespace loom::data
