#include "loom/data/formats/feature_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/idx.h"
#include "loom/data/formats/npy.h"

namespace loom::data {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// The record shape of a file (its array shape without the count) against the model's.
void check_record_shape(const std::string& path, const std::vector<int64_t>& record,
                        const std::vector<int64_t>& model) {
  std::vector<int64_t> squeezed = model;
  if (squeezed.size() > 1 && squeezed.front() == 1) squeezed.erase(squeezed.begin());
  const bool same_values = product(record) == product(model);
  const bool flat = record.size() == 1;
  if (same_values && (flat || record == model || record == squeezed)) return;
  throw InputError(
      fmt::format("{}: records of shape {} ({} values); the model takes {} ({} values)", path,
                  fmt::join(record, "x"), product(record), fmt::join(model, "x"), product(model)));
}

FeatureArray from_bytes(const std::string& path, const uint8_t* bytes, int64_t count,
                        const std::vector<int64_t>& shape,
                        const std::optional<Normalisation>& byte_norm) {
  if (!byte_norm)
    throw InputError(fmt::format(
        "{}: uint8 values, but the model records no pixel normalisation to apply to them; give "
        "float features, normalised as the model's training data was",
        path));
  FeatureArray out;
  out.count = count;
  out.sample_shape = shape;
  out.values.resize(size_t(count * product(shape)));
  const ByteAffine a = byte_affine(*byte_norm);
  for (size_t i = 0; i < out.values.size(); ++i) out.values[i] = normalise_byte(bytes[i], a);
  return out;
}

void check_finite(const std::string& path, const FeatureArray& f) {
  const int64_t numel = product(f.sample_shape);
  for (size_t i = 0; i < f.values.size(); ++i)
    if (!std::isfinite(f.values[i]))
      throw InputError(fmt::format("{}: record {}: value {} is {}", path, int64_t(i) / numel,
                                   int64_t(i) % numel, f.values[i]));
}

}  // namespace

FeatureArray read_features(const std::string& path, const std::vector<int64_t>& sample_shape,
                           const std::optional<Normalisation>& byte_norm, const CsvOptions& csv) {
  FeatureArray out;
  switch (detect_format(path)) {
    case SourceFormat::kFashionMnistDir:
      throw InputError(fmt::format("{}: is a folder; give one IDX images file", path));
    case SourceFormat::kShard:
      throw InputError(fmt::format(
          "{}: a loom shard holds training data; give the inputs as IDX, NPY or CSV (or use "
          "loom eval --data for a labelled set)",
          path));
    case SourceFormat::kIdx: {
      IdxArray a = read_idx(path);
      if (a.dims.size() < 2)
        throw InputError(
            fmt::format("{}: an IDX of inputs needs a count and a record shape, "
                        "this has {} dimension(s)",
                        path, a.dims.size()));
      const std::vector<int64_t> record(a.dims.begin() + 1, a.dims.end());
      check_record_shape(path, record, sample_shape);
      return from_bytes(path, a.bytes.data(), a.dims[0], sample_shape, byte_norm);
    }
    case SourceFormat::kNpy: {
      core::MappedFile f(path);
      NpyHeader h = parse_npy_header(f.data(), f.size(), path);
      if (h.shape.empty())
        throw InputError(fmt::format("{}: a 0-d array; inputs need a count dimension", path));
      std::vector<int64_t> record(h.shape.begin() + 1, h.shape.end());
      if (record.empty()) record.push_back(1);
      check_record_shape(path, record, sample_shape);
      if (h.dtype == NpyDtype::kUint8)
        return from_bytes(path, f.data() + h.data_offset, h.shape[0], sample_shape, byte_norm);
      out.count = h.shape[0];
      out.sample_shape = sample_shape;
      out.values.resize(size_t(h.numel()));
      for (int64_t i = 0; i < h.numel(); ++i)
        out.values[size_t(i)] = float(npy_value(h, f.data(), i));
      check_finite(path, out);
      return out;
    }
    case SourceFormat::kCsv: {
      CsvOptions o = csv;
      o.labels = false;
      Dataset ds = read_csv(path, o);
      check_record_shape(path, ds.sample_shape, sample_shape);
      out.count = ds.count;
      out.sample_shape = sample_shape;
      out.values = std::move(ds.features);
      return out;
    }
  }
  throw Error("unreachable");
}

}  // namespace loom::data
