// Protobuf's wire format (protobuf.dev, "Encoding"): each field is a key, (number << 3) | wire
// type, then a varint (type 0), 8 little-endian bytes (type 1), a varint length and the bytes
// (type 2), or 4 little-endian bytes (type 5). Fields go in number order and proto3 leaves out
// zeros, as protobuf's own serialiser does, so the bytes equal what TensorBoard would write.
#include "loom/train/tensorboard_event.h"

#include <cstring>

namespace loom::train::tensorboard {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

class Message {
 public:
  void varint(uint32_t field, uint64_t v) {
    if (v == 0) return;
    key(field, kVarint);
    put_varint(v);
  }
  void fixed64(uint32_t field, double v) {
    if (v == 0) return;
    key(field, kFixed64);
    put_double(v);
  }
  void fixed32(uint32_t field, float v) {
    // A scalar's value is written even when zero: the field is in a oneof, whose presence
    // proto3 keeps (a Value without it would be no scalar).
    key(field, kFixed32);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int i = 0; i < 4; ++i) out_.push_back(char(uint8_t(bits >> (8 * i))));
  }
  void bytes(uint32_t field, const std::string& b) {
    key(field, kBytes);
    put_varint(b.size());
    out_ += b;
  }
  // Packed repeated doubles: one length-delimited field of 8-byte values.
  void packed_doubles(uint32_t field, const std::vector<double>& v) {
    if (v.empty()) return;
    key(field, kBytes);
    put_varint(8 * v.size());
    for (double d : v) put_double(d);
  }
  const std::string& str() const { return out_; }

 private:
  void key(uint32_t field, WireType t) { put_varint((uint64_t(field) << 3) | t); }
  void put_varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) out_.push_back(char(uint8_t(v | 0x80)));
    out_.push_back(char(uint8_t(v)));
  }
  void put_double(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    for (int i = 0; i < 8; ++i) out_.push_back(char(uint8_t(bits >> (8 * i))));
  }
  std::string out_;
};

// An Event's wall_time and step; the caller adds what it holds.
Message event_head(double wall_time, int64_t step) {
  Message e;
  e.fixed64(1, wall_time);
  e.varint(2, uint64_t(step));  // int64 as a varint: two's complement, as protobuf does
  return e;
}

std::string summary_event(double wall_time, int64_t step, const Message& value) {
  Message summary;
  summary.bytes(1, value.str());
  Message e = event_head(wall_time, step);
  e.bytes(5, summary.str());
  return e.str();
}

}  // namespace

std::string file_version_event(double wall_time) {
  Message e = event_head(wall_time, 0);
  e.bytes(3, "brain.Event:2");
  return e.str();
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  Message v;
  v.bytes(1, tag);
  v.fixed32(2, value);
  return summary_event(wall_time, step, v);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text) {
  Message tensor;
  tensor.varint(1, 7);  // DT_STRING
  tensor.bytes(2, "");  // TensorShapeProto with no dims: a scalar
  tensor.bytes(8, text);
  Message plugin;
  plugin.bytes(1, "text");
  Message metadata;
  metadata.bytes(1, plugin.str());
  Message v;
  v.bytes(1, tag);
  v.bytes(8, tensor.str());
  v.bytes(9, metadata.str());
  return summary_event(wall_time, step, v);
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const Histogram& h) {
  Message histo;
  histo.fixed64(1, h.min);
  histo.fixed64(2, h.max);
  histo.fixed64(3, h.num);
  histo.fixed64(4, h.sum);
  histo.fixed64(5, h.sum_squares);
  histo.packed_doubles(6, h.bucket_limit);
  histo.packed_doubles(7, h.bucket);
  Message v;
  v.bytes(1, tag);
  v.bytes(5, histo.str());
  return summary_event(wall_time, step, v);
}

std::string session_start_event(double wall_time, int64_t step) {
  Message log;
  log.varint(1, 1);  // SessionLog.START
  Message e = event_head(wall_time, step);
  e.bytes(7, log.str());
  return e.str();
}

}  // namespace loom::train::tensorboard
