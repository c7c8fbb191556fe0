// NumPy .npy files (format versions 1-3, C order; float32, float64, uint8, int64, little-endian
// or single-byte). The header is a Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::data {

enum class NpyDtype { kFloat32, kFloat64, kUint8, kInt64 };
const char* npy_dtype_name(NpyDtype t);
size_t npy_dtype_size(NpyDtype t);

struct NpyHeader {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the values start in the file
  int64_t numel() const;
};

// Parses and checks the header of an .npy held in memory (the whole file): InputError naming
// `name` and the problem for a bad magic, an unsupported dtype, Fortran order, a shape that
// disagrees with the file size.
NpyHeader parse_npy_header(const uint8_t* data, size_t size, const std::string& name);

// Element i as a double / as an int64 (for labels: InputError if not integral).
double npy_value(const NpyHeader& h, const uint8_t* file, int64_t i);

// Writes an .npy (version 1) for tests and tools.
void write_npy(const std::string& path, NpyDtype dtype, const std::vector<int64_t>& shape,
               const void* values);

}  // namespace loom::data
