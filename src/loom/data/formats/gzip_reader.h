// A pull reader over bytes in memory that are either gzip (magic 1f 8b) or raw, so parsers
// read headers before deciding how much to inflate: a gzip bomb or a lying header then costs
// no more memory than the header claims.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::data {

bool has_gzip_magic(const uint8_t* data, size_t size);

class MaybeGzipReader {
 public:
  // `name` is used in error messages; the buffer must outlive the reader.
  MaybeGzipReader(const uint8_t* data, size_t size, std::string name);
  ~MaybeGzipReader();
  MaybeGzipReader(const MaybeGzipReader&) = delete;
  MaybeGzipReader& operator=(const MaybeGzipReader&) = delete;

  // Reads up to n bytes; returns fewer only at the end of the data. Throws InputError on a
  // garbled or truncated gzip stream.
  size_t read(uint8_t* dst, size_t n);
  bool compressed() const { return gzip_; }
  size_t consumed() const { return produced_; }  // decoded bytes handed out so far

 private:
  const uint8_t* data_;
  size_t size_;
  std::string name_;
  bool gzip_;
  size_t pos_ = 0;  // raw mode: next byte
  size_t produced_ = 0;
  bool stream_end_ = false;
  z_stream zs_{};
};

}  // namespace loom::data
