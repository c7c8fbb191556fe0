#include "loom/nn/io/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "loom/core/error.h"

namespace loom::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this build copies it as it lies");

namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";

// The dtypes of the specification (safetensors' Dtype enum) with their sizes in bytes. Sub-byte
// dtypes are left out: their tensors do not occupy whole bytes, and loom writes none.
const std::map<std::string, size_t>& dtype_sizes() {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  return sizes;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Checks the 8-byte length against the file's size: the header must fit in what follows it.
uint64_t checked_header_length(const uint8_t* first8, uint64_t file_size,
                               const std::string& source) {
  if (file_size < 8)
    throw InputError(
        fmt::format("{}: truncated safetensors file: {} bytes, fewer than its 8-byte header length",
                    source, file_size));
  const uint64_t n = read_u64_le(first8);
  if (n > file_size - 8)
    throw InputError(
        fmt::format("{}: safetensors header length {} runs past the end of the file ({} bytes): "
                    "truncated or not a safetensors file",
                    source, n, file_size));
  if (n > kSafetensorsMaxHeader)
    throw InputError(fmt::format("{}: safetensors header of {} bytes, larger than the {} accepted",
                                 source, n, kSafetensorsMaxHeader));
  if (n < 2)
    throw InputError(
        fmt::format("{}: safetensors header of {} bytes cannot hold a JSON object", source, n));
  return n;
}

std::vector<int64_t> read_shape(const json& j, const std::string& where) {
  if (!j.is_array()) throw InputError(fmt::format("{}: \"shape\" is not an array", where));
  std::vector<int64_t> shape;
  for (const json& d : j) {
    if (!d.is_number_unsigned())
      throw InputError(fmt::format("{}: \"shape\" holds {}, not a dimension >= 0", where,
                                   d.dump(-1, ' ', false, json::error_handler_t::replace)));
    const uint64_t v = d.get<uint64_t>();
    if (v > uint64_t(std::numeric_limits<int64_t>::max()))
      throw InputError(fmt::format("{}: dimension {} too large", where, v));
    shape.push_back(int64_t(v));
  }
  return shape;
}

// numel(shape) * size, or nullopt-like max on overflow (then no file can hold it).
uint64_t byte_size(const std::vector<int64_t>& shape, size_t size) {
  unsigned __int128 n = size;
  for (int64_t d : shape) {
    n *= uint64_t(d);
    if (n > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
  }
  return uint64_t(n);
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  const auto it = dtype_sizes().find(dtype);
  return it == dtype_sizes().end() ? 0 : it->second;
}

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<uint8_t> safetensors_bytes(const std::vector<SafetensorsView>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsView& t : tensors) {
    LOOM_CHECK(t.name != kMetadataKey && names.insert(t.name).second,
               "tensor name '{}' repeated or reserved", t.name);
    const uint64_t bytes = byte_size(t.shape, sizeof(float));
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text = header.dump();
  // The data then starts on an 8-byte boundary, as the reference writer aligns it.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* data = out.data() + 8 + text.size();
  for (const SafetensorsView& t : tensors) {
    const uint64_t bytes = byte_size(t.shape, sizeof(float));
    if (bytes > 0) std::memcpy(data, t.data, bytes);
    data += bytes;
  }
  return out;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> SafetensorsFile::bytes(const SafetensorsTensor& t) const {
  return {file_.data() + data_start_ + t.begin, size_t(t.end - t.begin)};
}

std::vector<float> SafetensorsFile::f32(const SafetensorsTensor& t) const {
  if (t.dtype != "F32")
    throw InputError(fmt::format("{}: tensor '{}' is {}, not F32", source_, t.name, t.dtype));
  std::vector<float> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), file_.data() + data_start_ + t.begin, v.size() * 4);
  return v;
}

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes, const std::string& source) {
  // The length is checked before the copy, so a bad header costs nothing.
  checked_header_length(bytes.data(), bytes.size(), source);
  return parse_owned(std::vector<uint8_t>(bytes.begin(), bytes.end()), source);
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(fmt::format("{}: cannot read its size", path));
  uint8_t first8[8] = {};
  in.seekg(0);
  in.read(reinterpret_cast<char*>(first8), std::min<std::streamoff>(size, 8));
  checked_header_length(first8, uint64_t(size), path);
  std::vector<uint8_t> file(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(file.data()), size);
  if (in.gcount() != size)
    throw InputError(fmt::format("{}: read {} of its {} bytes", path, in.gcount(), size));
  return parse_owned(std::move(file), path);
}

SafetensorsFile SafetensorsFile::parse_owned(std::vector<uint8_t> file, const std::string& source) {
  const uint64_t n = checked_header_length(file.data(), file.size(), source);
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  json header;
  try {
    header = json::parse(text, text + n);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: safetensors header is not valid JSON: {}", source, e.what()));
  }
  if (!header.is_object())
    throw InputError(fmt::format("{}: safetensors header is not a JSON object", source));

  SafetensorsFile f;
  f.source_ = source;
  f.data_start_ = size_t(8 + n);
  const uint64_t data_size = file.size() - f.data_start_;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      if (!entry.is_object())
        throw InputError(fmt::format("{}: \"__metadata__\" is not an object", source));
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw InputError(fmt::format("{}: metadata \"{}\" is not a string", source, key));
        f.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor '{}'", source, name);
    if (!entry.is_object()) throw InputError(fmt::format("{}: entry is not an object", where));
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) throw InputError(fmt::format("{}: no \"{}\"", where, key));
    SafetensorsTensor t;
    t.name = name;
    if (!entry["dtype"].is_string())
      throw InputError(fmt::format("{}: \"dtype\" is not a string", where));
    t.dtype = entry["dtype"].get<std::string>();
    const size_t size = safetensors_dtype_size(t.dtype);
    if (size == 0) throw InputError(fmt::format("{}: unknown dtype \"{}\"", where, t.dtype));
    t.shape = read_shape(entry["shape"], where);
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw InputError(
          fmt::format("{}: \"data_offsets\" is not two offsets [begin, end] >= 0", where));
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end)
      throw InputError(
          fmt::format("{}: data_offsets [{}, {}] end before they begin", where, t.begin, t.end));
    if (t.end > data_size)
      throw InputError(fmt::format("{}: data_offsets [{}, {}] run past the {} bytes of data", where,
                                   t.begin, t.end, data_size));
    const uint64_t expect = byte_size(t.shape, size);
    if (t.end - t.begin != expect)
      throw InputError(
          fmt::format("{}: data_offsets [{}, {}] hold {} bytes; shape [{}] of {} needs {}", where,
                      t.begin, t.end, t.end - t.begin, fmt::join(t.shape, ", "), t.dtype, expect));
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& t : f.tensors_) {
    if (t.begin < at)
      throw InputError(
          fmt::format("{}: tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", source,
                      previous->name, t.name, previous->begin, previous->end, t.begin, t.end));
    if (t.begin > at)
      throw InputError(fmt::format("{}: a gap of {} bytes in the data before tensor '{}'", source,
                                   t.begin - at, t.name));
    at = t.end;
    previous = &t;
  }
  if (at != data_size)
    throw InputError(
        fmt::format("{}: tensors cover {} of the {} bytes of data", source, at, data_size));
  f.file_ = std::move(file);
  return f;
}

}  // namespace loom::nn
