// The record framing of TensorBoard's event files, which is TFRecord's (TensorFlow's
// tensorflow/core/lib/io/record_writer.cc; the "TFRecord format" of its tf.data guide):
//   uint64 length                       little-endian
//   uint32 masked CRC-32C of the 8 length bytes
//   byte   data[length]                 one serialised Event
//   uint32 masked CRC-32C of data
// A reader checks both CRCs, so a record cut short by a kill is dropped, not misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::train {

// CRC-32C of the bytes, rotated right by 15 bits plus 0xa282ead8 (TensorFlow's crc32c::Mask):
// a CRC stored next to data that holds CRCs must not be a CRC of a CRC.
uint32_t masked_crc32c(const void* data, size_t n);

// One framed record holding `payload`.
std::string frame_record(std::string_view payload);

}  // namespace loom::train
