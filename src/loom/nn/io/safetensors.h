// The safetensors file format (Hugging Face, huggingface/safetensors; the layout below is its
// specification restated, the code is loom's own):
//
//   u64 little-endian N | N bytes of UTF-8 JSON (may end in spaces) | the data buffer
//   JSON: {"<name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
//          ..., "__metadata__": {"<key>": "<string value>", ...}}
//
// Offsets are relative to the start of the data buffer; tensors are little-endian, C order, and
// together cover the buffer with no gap and no overlap. A file holds no code, so reading one
// executes nothing (unlike a pickled PyTorch state_dict).
//
// It lives in nn because it is the exchange format of a model's weights, beside the ONNX import:
// train writes a run's final weights through it and the command line exports and loads them,
// both from above nn. The reader and writer themselves know nothing of models (model_file.h
// maps a Model's layers onto named tensors).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace loom::nn {

// Headers above this size are refused, as the reference readers refuse them.
inline constexpr uint64_t kSafetensorsMaxHeader = uint64_t(100) << 20;

// Bytes per element of a dtype name of the specification ("F32" 4, "BF16" 2, "BOOL" 1, ...);
// 0 for a name it does not define.
size_t safetensors_dtype_size(const std::string& dtype);

// A tensor to write: float32 values, numel(shape) of them.
struct SafetensorsView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// The file's bytes: tensors laid out in the given order, the header padded with spaces so the
// data starts on an 8-byte boundary. Names must be unique and not "__metadata__".
std::vector<uint8_t> safetensors_bytes(const std::vector<SafetensorsView>& tensors,
                                       const std::map<std::string, std::string>& metadata);

struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // in the data buffer
  int64_t numel() const;
};

// A parsed file: its tensors in data order, its metadata, and the data buffer.
class SafetensorsFile {
 public:
  const std::string& source() const { return source_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor named `name`, or null.
  const SafetensorsTensor* find(const std::string& name) const;
  // The values of an F32 tensor (InputError naming the file and tensor for another dtype).
  std::vector<float> f32(const SafetensorsTensor& t) const;
  // The raw bytes of a tensor.
  std::span<const uint8_t> bytes(const SafetensorsTensor& t) const;

  // Parses a whole file held in memory; `source` (a path) is named in every error. InputError
  // for: fewer than 8 bytes, a header length past the end (checked before anything is
  // allocated) or above kSafetensorsMaxHeader, a header that is not JSON or not an object of
  // the expected fields, an unknown dtype, a negative dimension, offsets that are reversed, out
  // of the buffer, of another size than shape x dtype, overlapping or leaving a gap, and
  // metadata that is not a map of strings.
  static SafetensorsFile parse(std::span<const uint8_t> bytes, const std::string& source);
  // Reads and parses a file: InputError if it cannot be opened or read.
  static SafetensorsFile read(const std::string& path);

 private:
  static SafetensorsFile parse_owned(std::vector<uint8_t> file, const std::string& source);
  std::string source_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<uint8_t> file_;  // the whole file; the data buffer starts at data_start_
  size_t data_start_ = 0;
};

}  // namespace loom::nn
