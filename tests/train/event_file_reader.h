// Reads TensorBoard event files back in the tests, apart from the writer's code: the framing
// checked with the bit-at-a-time CRC-32C and TensorFlow's mask written out again, and the
// Events taken apart by walking protobuf's wire format (tensorboard_event.h lists the fields).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/io/crc32c.h"

namespace loom::train::testing {

inline uint32_t mask_crc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline uint64_t read_le(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(b[at + size_t(i)])) << (8 * i);
  return v;
}

// The payloads of a file's records; throws on a bad length or CRC, or a record cut short.
inline std::vector<std::string> read_records(std::string_view bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) throw std::runtime_error("a record header cut short");
    const uint64_t n = read_le(bytes, at, 8);
    if (read_le(bytes, at + 8, 4) != mask_crc(core::crc32c_ref(bytes.data() + at, 8)))
      throw std::runtime_error("bad length CRC at byte " + std::to_string(at));
    if (bytes.size() - at - 12 < n + 4) throw std::runtime_error("a record cut short");
    const std::string_view payload = bytes.substr(at + 12, n);
    if (read_le(bytes, at + 12 + n, 4) != mask_crc(core::crc32c_ref(payload.data(), n)))
      throw std::runtime_error("bad data CRC at byte " + std::to_string(at));
    out.emplace_back(payload);
    at += 16 + n;
  }
  return out;
}

inline std::vector<std::string> read_record_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return read_records(ss.str());
}

// One protobuf field: its number, wire type, and the value (varint or fixed bits, or bytes).
struct Field {
  uint32_t number = 0, type = 0;
  uint64_t bits = 0;
  std::string bytes;
  double as_double() const {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  float as_float() const {
    const uint32_t b = uint32_t(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
};

inline std::vector<Field> fields_of(std::string_view m) {
  std::vector<Field> out;
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= m.size() || shift > 63) throw std::runtime_error("bad varint");
      const uint8_t c = uint8_t(m[at++]);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
  };
  while (at < m.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = uint32_t(key >> 3);
    f.type = uint32_t(key & 7);
    if (f.type == 0) {
      f.bits = varint();
    } else if (f.type == 1 || f.type == 5) {
      const int n = f.type == 1 ? 8 : 4;
      if (m.size() - at < size_t(n)) throw std::runtime_error("fixed field cut short");
      f.bits = read_le(m, at, n);
      at += size_t(n);
    } else if (f.type == 2) {
      const uint64_t n = varint();
      if (m.size() - at < n) throw std::runtime_error("bytes field cut short");
      f.bytes = std::string(m.substr(at, n));
      at += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.type));
    }
    out.push_back(std::move(f));
  }
  return out;
}

// What the tests look at in an Event.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool session_start = false;
  std::string tag;  // of its one summary value
  bool has_scalar = false;
  float scalar = 0;
  std::string text;  // a text summary's string
  bool has_histogram = false;
  double h_min = 0, h_max = 0, h_num = 0, h_sum = 0;
  std::vector<double> h_limits, h_counts;
};

inline std::vector<double> packed_doubles(const std::string& b) {
  std::vector<double> out(b.size() / 8);
  std::memcpy(out.data(), b.data(), out.size() * 8);
  return out;
}

inline DecodedEvent decode_event(std::string_view payload) {
  DecodedEvent e;
  for (const Field& f : fields_of(payload)) {
    if (f.number == 1) e.wall_time = f.as_double();
    if (f.number == 2) e.step = int64_t(f.bits);
    if (f.number == 3) e.file_version = f.bytes;
    if (f.number == 7)
      for (const Field& s : fields_of(f.bytes)) e.session_start |= s.number == 1 && s.bits == 1;
    if (f.number != 5) continue;
    for (const Field& v : fields_of(f.bytes)) {  // Summary.value
      for (const Field& x : fields_of(v.bytes)) {
        if (x.number == 1) e.tag = x.bytes;
        if (x.number == 2) {
          e.has_scalar = true;
          e.scalar = x.as_float();
        }
        if (x.number == 8)
          for (const Field& t : fields_of(x.bytes))
            if (t.number == 8) e.text = t.bytes;
        if (x.number == 5) {
          e.has_histogram = true;
          for (const Field& h : fields_of(x.bytes)) {
            if (h.number == 1) e.h_min = h.as_double();
            if (h.number == 2) e.h_max = h.as_double();
            if (h.number == 3) e.h_num = h.as_double();
            if (h.number == 4) e.h_sum = h.as_double();
            if (h.number == 6) e.h_limits = packed_doubles(h.bytes);
            if (h.number == 7) e.h_counts = packed_doubles(h.bytes);
          }
        }
      }
    }
  }
  return e;
}

// Every event of a folder's event files, file by file in name order.
inline std::vector<DecodedEvent> read_events(const std::vector<std::string>& files) {
  std::vector<DecodedEvent> out;
  for (const std::string& f : files)
    for (const std::string& r : read_record_file(f)) out.push_back(decode_event(r));
  return out;
}

}  // namespace loom::train::testing
