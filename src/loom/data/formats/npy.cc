#include "loom/data/formats/npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "loom/core/error.h"

namespace loom::data {

const char* npy_dtype_name(NpyDtype t) {
  switch (t) {
    case NpyDtype::kFloat32:
      return "float32";
    case NpyDtype::kFloat64:
      return "float64";
    case NpyDtype::kUint8:
      return "uint8";
    case NpyDtype::kInt64:
      return "int64";
  }
  return "?";
}

size_t npy_dtype_size(NpyDtype t) {
  switch (t) {
    case NpyDtype::kFloat32:
      return 4;
    case NpyDtype::kUint8:
      return 1;
    default:
      return 8;
  }
}

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

// The value text after 'key': in the header dict, or empty if the key is absent.
std::string_view dict_value(std::string_view dict, std::string_view key) {
  for (char q : {'\'', '"'}) {
    std::string k(1, q);
    k.append(key);
    k.push_back(q);
    size_t p = dict.find(k);
    if (p == std::string_view::npos) continue;
    p = dict.find(':', p + k.size());
    if (p == std::string_view::npos) return {};
    p = dict.find_first_not_of(" \t", p + 1);
    if (p == std::string_view::npos) return {};
    return dict.substr(p);
  }
  return {};
}

}  // namespace

NpyHeader parse_npy_header(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0)
    throw InputError(fmt::format("{}: not a NumPy .npy file (wrong magic)", name));
  const int major = data[6];
  size_t header_len, start;
  if (major == 1) {
    header_len = size_t(data[8]) | (size_t(data[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw InputError(fmt::format("{}: truncated .npy header", name));
    header_len = size_t(data[8]) | (size_t(data[9]) << 8) | (size_t(data[10]) << 16) |
                 (size_t(data[11]) << 24);
    start = 12;
  } else {
    throw InputError(fmt::format("{}: unsupported .npy format version {}", name, major));
  }
  if (header_len > size - start)
    throw InputError(fmt::format("{}: truncated .npy header ({} bytes announced, {} present)", name,
                                 header_len, size - start));
  std::string_view dict(reinterpret_cast<const char*>(data + start), header_len);
  NpyHeader h;
  h.data_offset = start + header_len;

  std::string_view descr = dict_value(dict, "descr");
  if (!descr.empty() && descr[0] == '[')
    throw InputError(fmt::format(
        "{}: a structured dtype (a record array, 'descr': {}) is not supported: save each field "
        "as a plain array (features float32 or uint8, labels int64)",
        name, std::string(descr.substr(0, std::min<size_t>(descr.find(']'), 79) + 1))));
  if (descr.size() < 2 || (descr[0] != '\'' && descr[0] != '"'))
    throw InputError(fmt::format("{}: .npy header has no 'descr'", name));
  size_t close = descr.find(descr[0], 1);
  if (close == std::string_view::npos)
    throw InputError(fmt::format("{}: .npy header has a malformed 'descr'", name));
  std::string d(descr.substr(1, close - 1));
  if (d == "<f4")
    h.dtype = NpyDtype::kFloat32;
  else if (d == "<f8")
    h.dtype = NpyDtype::kFloat64;
  else if (d == "|u1" || d == "<u1" || d == "u1")
    h.dtype = NpyDtype::kUint8;
  else if (d == "<i8")
    h.dtype = NpyDtype::kInt64;
  else
    throw InputError(fmt::format(
        "{}: unsupported .npy dtype '{}' (loom reads <f4, <f8, |u1, <i8: little-endian float32, "
        "float64, uint8, int64)",
        name, d));

  std::string_view fortran = dict_value(dict, "fortran_order");
  if (fortran.substr(0, 4) == "True")
    throw InputError(fmt::format(
        "{}: Fortran-order .npy arrays are not supported; save with np.ascontiguousarray", name));
  if (fortran.substr(0, 5) != "False")
    throw InputError(fmt::format("{}: .npy header has no 'fortran_order'", name));

  std::string_view shape = dict_value(dict, "shape");
  if (shape.empty() || shape[0] != '(')
    throw InputError(fmt::format("{}: .npy header has no 'shape' tuple", name));
  size_t shape_end = shape.find(')');
  if (shape_end == std::string_view::npos)
    throw InputError(fmt::format("{}: .npy header has a malformed 'shape'", name));
  std::string_view dims = shape.substr(1, shape_end - 1);
  int64_t total = 1;
  size_t p = 0;
  while (p < dims.size()) {
    while (p < dims.size() && (dims[p] == ' ' || dims[p] == ',')) ++p;
    if (p >= dims.size()) break;
    int64_t v = 0;
    size_t q = p;
    while (q < dims.size() && dims[q] >= '0' && dims[q] <= '9') {
      if (v > (int64_t(1) << 40)) break;
      v = v * 10 + (dims[q] - '0');
      ++q;
    }
    if (q == p || v > (int64_t(1) << 40) || (q < dims.size() && dims[q] != ',' && dims[q] != ' '))
      throw InputError(fmt::format("{}: .npy shape '{}' is malformed", name, std::string(dims)));
    if (v > 0 && total > (int64_t(1) << 42) / v)
      throw InputError(fmt::format("{}: absurd .npy shape ({})", name, std::string(dims)));
    total *= v;
    h.shape.push_back(v);
    p = q;
  }
  if (h.shape.size() > 16)
    throw InputError(fmt::format("{}: absurd .npy shape ({})", name, std::string(dims)));
  // One record's values (every dimension after the count), bounded even when the count is 0
  // and the total therefore is too.
  int64_t record = 1;
  for (size_t i = 1; i < h.shape.size(); ++i) {
    const int64_t v = h.shape[i];
    if (v > 0 && record > (int64_t(1) << 42) / v)
      throw InputError(
          fmt::format("{}: absurd .npy shape ({}): one record would hold more than 2^42 values",
                      name, std::string(dims)));
    record *= v;
  }
  const uint64_t need = uint64_t(total) * npy_dtype_size(h.dtype);
  if (size - h.data_offset != need)
    throw InputError(fmt::format("{}: .npy shape ({}) of {} needs {} data bytes, the file has {}{}",
                                 name, std::string(dims), npy_dtype_name(h.dtype), need,
                                 size - h.data_offset,
                                 size - h.data_offset < need ? " (truncated)" : ""));
  return h;
}

double npy_value(const NpyHeader& h, const uint8_t* file, int64_t i) {
  const uint8_t* p = file + h.data_offset + size_t(i) * npy_dtype_size(h.dtype);
  switch (h.dtype) {
    case NpyDtype::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case NpyDtype::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case NpyDtype::kUint8:
      return *p;
    case NpyDtype::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
  }
  return 0;
}

void write_npy(const std::string& path, NpyDtype dtype, const std::vector<int64_t>& shape,
               const void* values) {
  const char* descr = dtype == NpyDtype::kFloat32   ? "<f4"
                      : dtype == NpyDtype::kFloat64 ? "<f8"
                      : dtype == NpyDtype::kUint8   ? "|u1"
                                                    : "<i8";
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) dims += std::to_string(d) + ",", n *= d;
  if (shape.size() > 1) dims.pop_back();
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Pad with spaces so the data starts on a 64-byte boundary, ending in '\n' (NEP 1).
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string head(kMagic, 6);
  head += '\x01';
  head += '\x00';
  head += char(dict.size() & 0xff);
  head += char(dict.size() >> 8);
  head += dict;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw InputError(fmt::format("{}: cannot open for writing", path));
  size_t bytes = size_t(n) * npy_dtype_size(dtype);
  if (std::fwrite(head.data(), 1, head.size(), f.get()) != head.size() ||
      (bytes && std::fwrite(values, 1, bytes, f.get()) != bytes))
    throw InputError(fmt::format("{}: write failed", path));
}

}  // namespace loom::data
