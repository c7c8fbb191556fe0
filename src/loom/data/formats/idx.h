// The IDX format of LeCun's MNIST files (and Fashion-MNIST): a big-endian header
//   0x00 0x00 <type> <ndims>, then ndims uint32 dimensions, then the data in C order,
// optionally gzip-compressed as a whole. loom reads only type 0x08 (unsigned bytes), which is
// what image and label files use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // product(dims) bytes, C order
  int64_t numel() const;
};

// Reads a uint8 IDX file, gzip-compressed (detected by the magic 1f 8b) or raw. Throws
// loom::InputError naming the file and the problem: missing, truncated, garbled gzip, wrong
// magic, unsupported type, absurd dims, or dims that disagree with the data size.
IdxArray read_idx(const std::string& path);

// The same over a buffer already in memory; `name` is used in error messages. (The fuzz
// harness drives this.)
IdxArray parse_idx(const uint8_t* data, size_t size, const std::string& name);

// Writes a raw (or, with gzip, compressed) uint8 IDX file; for tests and converters.
void write_idx(const std::string& path, const IdxArray& array, bool gzip);

}  // namespace loom::data
