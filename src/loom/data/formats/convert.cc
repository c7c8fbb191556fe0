#include "loom/data/formats/convert.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/gzip_reader.h"
#include "loom/data/formats/idx.h"
#include "loom/data/formats/npy.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/formats/token_shard.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/shard_source.h"

namespace loom::data {

const char* format_name(SourceFormat f) {
  switch (f) {
    case SourceFormat::kFashionMnistDir:
      return "fashion-mnist folder";
    case SourceFormat::kIdx:
      return "idx";
    case SourceFormat::kCsv:
      return "csv";
    case SourceFormat::kNpy:
      return "npy";
    case SourceFormat::kShard:
      return "loom shard";
  }
  return "?";
}

namespace {

bool named_as(const std::string& path, std::initializer_list<const char*> suffixes) {
  std::string name = std::filesystem::path(path).filename().string();
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* s : suffixes) {
    const size_t n = std::strlen(s);
    if (name.size() >= n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

// Text: no NUL and no control bytes but tab, newline and carriage return in the first 4 KiB
// (bytes >= 0x80 pass: UTF-8).
bool looks_like_text(const uint8_t* d, size_t n) {
  for (size_t i = 0; i < std::min<size_t>(n, 4096); ++i)
    if ((d[i] < 0x20 && d[i] != '\t' && d[i] != '\n' && d[i] != '\r') || d[i] == 0x7f) return false;
  return true;
}

}  // namespace

SourceFormat detect_format(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return SourceFormat::kFashionMnistDir;
  core::MappedFile f(path);
  const uint8_t* d = f.data();
  if (f.size() >= 8 && std::memcmp(d, kShardMagic, 8) == 0) return SourceFormat::kShard;
  if (f.size() >= 6 && std::memcmp(d, "\x93NUMPY", 6) == 0) return SourceFormat::kNpy;
  if (f.size() >= 2 && ((d[0] == 0x1f && d[1] == 0x8b) || (d[0] == 0 && d[1] == 0)))
    return SourceFormat::kIdx;
  const std::string head =
      escaped_text(std::string_view(reinterpret_cast<const char*>(d), f.size()), 16);
  if (named_as(path, {".npy"}))
    throw InputError(
        fmt::format("{}: not a NumPy .npy file: it starts with \"{}\", an .npy with \"\\x93NUMPY\"",
                    path, head));
  if (named_as(path, {".shard"}))
    throw InputError(fmt::format(
        "{}: not a loom shard: it starts with \"{}\", a shard with \"LOOMSHRD\"", path, head));
  if (named_as(path, {".idx", ".idx.gz", "-ubyte", "-ubyte.gz", ".idx1", ".idx3"}))
    throw InputError(fmt::format(
        "{}: not an IDX file: it starts with \"{}\", an IDX file with \"\\x00\\x00\\x08\" "
        "and its dimension count (or the gzip magic \"\\x1f\\x8b\")",
        path, head));
  if (!looks_like_text(d, f.size()))
    throw InputError(fmt::format(
        "{}: not a format loom reads (CSV text, NumPy .npy, IDX, loom shard): it starts with "
        "\"{}\"",
        path, head));
  return SourceFormat::kCsv;
}

namespace {

ShardInfo write_dataset_u8(const std::string& dst, const IdxArray& images,
                           const std::vector<int32_t>& labels, std::vector<int64_t> shape,
                           int num_classes, int64_t chunk, const std::string& image_file,
                           const std::string& label_file) {
  ShardSpec spec{ShardDtype::kUint8, shape, num_classes, int64_t(labels.size()), chunk};
  spec.source = image_file;
  ShardWriter w(dst, spec);
  const int64_t numel = images.dims.empty() ? 0 : images.numel() / images.dims[0];
  for (size_t i = 0; i < labels.size(); ++i)
    w.append(labels[i], images.bytes.data() + int64_t(i) * numel,
             fmt::format("{}: record {}", label_file, i));
  w.finish();
  return w.info();
}

std::vector<int32_t> labels_from_idx(const IdxArray& a, const std::string& path) {
  if (a.dims.size() != 1)
    throw InputError(
        fmt::format("{}: a labels file has 1 dimension, this has {}", path, a.dims.size()));
  return std::vector<int32_t>(a.bytes.begin(), a.bytes.end());
}

ShardInfo convert_idx(const std::string& images_path, const std::string& labels_path,
                      const std::string& dst, const ConvertOptions& o) {
  if (labels_path.empty())
    throw ConfigError(fmt::format("{}: an IDX images file needs --labels FILE", images_path));
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() < 2)
    throw InputError(fmt::format("{}: an images file has >= 2 dimensions", images_path));
  if (images.dims[0] != labels.dims[0])
    throw InputError(fmt::format("{} has {} images but {} has {} labels", images_path,
                                 images.dims[0], labels_path, labels.dims[0]));
  // 28x28 images become {1, 28, 28}, the shape the in-memory IDX path gives.
  std::vector<int64_t> shape(images.dims.begin() + 1, images.dims.end());
  if (shape.size() == 2) shape.insert(shape.begin(), 1);
  int classes = o.num_classes > 0 ? o.num_classes : 10;
  return write_dataset_u8(dst, images, labels_from_idx(labels, labels_path), shape, classes,
                          o.chunk_records, images_path, labels_path);
}

std::string fmnist_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""})
    if (core::file_exists(dir + "/" + stem + ext)) return dir + "/" + stem + ext;
  throw InputError(
      fmt::format("{}/{}[.gz] not found (apt-get install dataset-fashion-mnist)", dir, stem));
}

// Features as stored (uint8) or as float32, record i of an NPY array of n records. A value that
// is NaN or Inf, or beyond float32, is an InputError naming the file `name` and the record:
// the data is refused where it enters, not when training meets it.
void npy_record(const NpyHeader& h, const core::MappedFile& f, int64_t i, int64_t numel, bool u8,
                std::vector<float>& row, const void** out, const std::string& name) {
  if (u8) {
    *out = f.data() + h.data_offset + i * numel;
    return;
  }
  for (int64_t j = 0; j < numel; ++j) {
    const double v = npy_value(h, f.data(), i * numel + j);
    row[size_t(j)] = float(v);
    if (!std::isfinite(row[size_t(j)]))
      throw InputError(fmt::format("{}: record {} value {} is {}{}", name, i, j, v,
                                   std::isfinite(v) ? " (beyond float32)" : ""));
  }
  *out = row.data();
}

// The record shape of an NPY features array: its dimensions after the count, checked here so
// that an error names the array's file rather than the shard being written.
std::vector<int64_t> npy_record_shape(const NpyHeader& h, const std::string& name) {
  if (h.shape.empty())
    throw InputError(fmt::format("{}: a features array needs a first (count) dimension", name));
  std::vector<int64_t> shape(h.shape.begin() + 1, h.shape.end());
  if (shape.empty()) shape.push_back(1);
  if (int(shape.size()) > kShardMaxDims)
    throw InputError(fmt::format(
        "{}: shape ({}): records of {} dimensions; a shard record has 1 to {} (reshape the array)",
        name, fmt::join(h.shape, ", "), shape.size(), kShardMaxDims));
  return shape;
}

// Regression data: features and float targets of shape (n,) or (n, K).
ShardInfo convert_npy_targets(const std::string& src, const std::string& dst,
                              const ConvertOptions& o) {
  core::MappedFile xf(src), tf(o.targets);
  NpyHeader xh = parse_npy_header(xf.data(), xf.size(), src);
  NpyHeader th = parse_npy_header(tf.data(), tf.size(), o.targets);
  const std::vector<int64_t> shape = npy_record_shape(xh, src);
  const int64_t n = xh.shape[0];
  if (th.shape.empty() || th.shape.size() > 2 || th.shape[0] != n)
    throw InputError(fmt::format("{}: targets must have shape ({},) or ({}, K), the file has ({})",
                                 o.targets, n, n, fmt::join(th.shape, ", ")));
  if (th.dtype != NpyDtype::kFloat32 && th.dtype != NpyDtype::kFloat64)
    throw InputError(fmt::format(
        "{}: targets must be float32 or float64 (class labels go in --labels), the file has {}",
        o.targets, npy_dtype_name(th.dtype)));
  const int64_t k = th.shape.size() == 2 ? th.shape[1] : 1;
  const bool u8 = xh.dtype == NpyDtype::kUint8;
  ShardSpec spec{u8 ? ShardDtype::kUint8 : ShardDtype::kFloat32, shape, 0, n, o.chunk_records};
  spec.target = ShardTarget::kFloat;
  spec.target_numel = k;
  spec.source = src;
  ShardWriter w(dst, spec);
  const int64_t numel = n ? xh.numel() / n : 0;
  std::vector<float> row(static_cast<size_t>(numel)), t(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) t[size_t(j)] = float(npy_value(th, tf.data(), i * k + j));
    const void* features = nullptr;
    npy_record(xh, xf, i, numel, u8, row, &features, src);
    w.append_targets(t.data(), features, fmt::format("{}: record {}", o.targets, i));
  }
  w.finish();
  return w.info();
}

ShardInfo convert_npy(const std::string& src, const std::string& dst, const ConvertOptions& o) {
  if (!o.targets.empty()) {
    if (!o.labels.empty())
      throw ConfigError(
          fmt::format("{}: give --labels (classes) or --targets (regression), not both", src));
    return convert_npy_targets(src, dst, o);
  }
  if (o.labels.empty())
    throw ConfigError(fmt::format(
        "{}: an .npy features file needs --labels FILE.npy (classes) or --targets FILE.npy "
        "(float targets)",
        src));
  core::MappedFile xf(src), yf(o.labels);
  NpyHeader xh = parse_npy_header(xf.data(), xf.size(), src);
  NpyHeader yh = parse_npy_header(yf.data(), yf.size(), o.labels);
  const std::vector<int64_t> shape = npy_record_shape(xh, src);
  if (yh.shape.size() != 1 || yh.shape[0] != xh.shape[0])
    throw InputError(fmt::format("{}: labels must have shape ({},), the file has {} dimensions{}",
                                 o.labels, xh.shape[0], yh.shape.size(),
                                 yh.shape.size() == 1 ? fmt::format(" of {}", yh.shape[0]) : ""));
  if (yh.dtype == NpyDtype::kFloat32 || yh.dtype == NpyDtype::kFloat64)
    throw InputError(fmt::format("{}: labels must be integers (uint8 or int64), the file has {}",
                                 o.labels, npy_dtype_name(yh.dtype)));
  const int64_t n = xh.shape[0];
  std::vector<int32_t> labels(static_cast<size_t>(n));
  int64_t max_label = -1;
  for (int64_t i = 0; i < n; ++i) {
    labels[size_t(i)] =
        checked_label(npy_value(yh, yf.data(), i), o.max_classes, o.labels, i, "--max-classes");
    max_label = std::max<int64_t>(max_label, labels[size_t(i)]);
  }
  const int classes = o.num_classes > 0 ? o.num_classes : int(max_label + 1);
  if (max_label >= classes)
    throw InputError(
        fmt::format("{}: label {} is outside the --classes {}", o.labels, max_label, classes));
  const bool u8 = xh.dtype == NpyDtype::kUint8;
  ShardSpec spec{u8 ? ShardDtype::kUint8 : ShardDtype::kFloat32, shape, std::max(classes, 1), n,
                 o.chunk_records};
  spec.source = src;
  ShardWriter w(dst, spec);
  const int64_t numel = n ? xh.numel() / n : 0;
  std::vector<float> row(static_cast<size_t>(numel));
  for (int64_t i = 0; i < n; ++i) {
    const void* features = nullptr;
    npy_record(xh, xf, i, numel, u8, row, &features, src);
    w.append(labels[size_t(i)], features, fmt::format("{}: record {}", src, i));
  }
  w.finish();
  return w.info();
}

}  // namespace

ShardInfo convert_to_shard(const std::string& src, const std::string& dst,
                           const ConvertOptions& o) {
  if (o.num_classes < 0)
    throw ConfigError(fmt::format("--classes {}: give a class count >= 1 (or 0: from the labels)",
                                  o.num_classes));
  if (o.chunk_records < 0)
    throw ConfigError(fmt::format(
        "--chunk-records {}: give >= 1 records per chunk (or 0: about 1 MiB)", o.chunk_records));
  if (o.max_classes < 1 || o.max_classes > kShardMaxClasses)
    throw ConfigError(
        fmt::format("--max-classes {}: give 1 to {}", o.max_classes, kShardMaxClasses));
  switch (detect_format(src)) {
    case SourceFormat::kFashionMnistDir: {
      const std::string p = o.test_split ? "t10k" : "train";
      return convert_idx(fmnist_file(src, p + "-images-idx3-ubyte"),
                         fmnist_file(src, p + "-labels-idx1-ubyte"), dst, o);
    }
    case SourceFormat::kIdx:
      return convert_idx(src, o.labels, dst, o);
    case SourceFormat::kNpy:
      return convert_npy(src, dst, o);
    case SourceFormat::kCsv: {
      CsvOptions csv = o.csv;
      if (o.num_classes > 0) csv.num_classes = o.num_classes;
      csv.max_classes = o.max_classes;
      Dataset ds = read_csv(src, csv);
      ShardSpec spec{ShardDtype::kFloat32, ds.sample_shape, ds.num_classes, ds.count,
                     o.chunk_records};
      spec.source = src;
      ShardWriter w(dst, spec);
      const int64_t numel = ds.sample_numel();
      for (int64_t i = 0; i < ds.count; ++i)
        w.append(ds.labels[size_t(i)], ds.features.data() + i * numel,
                 fmt::format("{}: record {}", src, i));
      w.finish();
      return w.info();
    }
    case SourceFormat::kShard: {
      ShardSource in(src, {ShardVerify::kAll, std::nullopt});
      const ShardInfo& si = in.info();
      const bool labels = si.target == ShardTarget::kClassLabel;
      ShardSpec spec{si.dtype, si.shape,
                     labels && o.num_classes > 0 ? o.num_classes : si.num_classes, si.count,
                     o.chunk_records};
      spec.target = si.target;
      spec.target_numel = si.target_numel;
      spec.source = src;
      const int64_t tb = si.target_bytes();
      ShardWriter w(dst, spec);
      std::vector<float> t(size_t(si.target_numel));
      for (int64_t i = 0; i < si.count; ++i) {
        const std::string where = fmt::format("{}: record {}", src, i);
        if (labels) {
          int32_t label;
          std::memcpy(&label, in.record(i), 4);
          w.append(label, in.record(i) + tb, where);
        } else {
          std::memcpy(t.data(), in.record(i), size_t(tb));
          w.append_targets(t.data(), in.record(i) + tb, where);
        }
      }
      w.finish();
      return w.info();
    }
  }
  throw Error("unreachable");
}

namespace {
// Labels already checked against a bound (the caller's), so the histogram stays that small;
// those outside [0, bound) (a corrupt shard's) are counted in *outside.
std::vector<int64_t> histogram(const std::vector<int32_t>& labels, int64_t bound,
                               int64_t* outside = nullptr) {
  std::vector<int64_t> h;
  for (int32_t y : labels) {
    if (y < 0 || y >= bound) {
      if (outside) ++*outside;
      continue;
    }
    if (size_t(y) >= h.size()) h.resize(size_t(y) + 1, 0);
    ++h[size_t(y)];
  }
  return h;
}
}  // namespace

FileSummary inspect_file(const std::string& path, const CsvOptions& csv) {
  FileSummary s;
  s.format = detect_format(path);
  s.checksum = "none in this format";
  switch (s.format) {
    case SourceFormat::kFashionMnistDir:
      throw InputError(fmt::format("{}: is a folder; inspect one of its files", path));
    case SourceFormat::kIdx: {
      IdxArray a = read_idx(path);
      s.dtype = "uint8";
      s.shape = a.dims;
      s.count = a.dims[0];
      if (a.dims.size() == 1) s.label_histogram = histogram({a.bytes.begin(), a.bytes.end()}, 256);
      core::MappedFile f(path);
      if (has_gzip_magic(f.data(), f.size())) s.checksum = "gzip CRC-32 ok";
      break;
    }
    case SourceFormat::kCsv: {
      Dataset ds = read_csv(path, csv);
      s.dtype = "float32 (text)";
      s.shape = {ds.count, ds.sample_numel()};
      s.count = ds.count;
      s.label_histogram = histogram(ds.labels, csv.max_classes);
      break;
    }
    case SourceFormat::kNpy: {
      core::MappedFile f(path);
      NpyHeader h = parse_npy_header(f.data(), f.size(), path);
      // Inspect accepts what convert accepts: a count dimension, records a shard can hold,
      // finite values.
      npy_record_shape(h, path);
      if (h.dtype == NpyDtype::kFloat32 || h.dtype == NpyDtype::kFloat64) {
        const int64_t n = h.numel(), per = h.shape[0] > 0 ? n / h.shape[0] : 1;
        for (int64_t i = 0; i < n; ++i) {
          const double v = npy_value(h, f.data(), i);
          if (!std::isfinite(float(v)))
            throw InputError(fmt::format("{}: record {} value {} is {}{}", path, i / per, i % per,
                                         v, std::isfinite(v) ? " (beyond float32)" : ""));
        }
      }
      s.dtype = npy_dtype_name(h.dtype);
      s.shape = h.shape;
      s.count = h.shape[0];
      if (h.shape.size() == 1 && (h.dtype == NpyDtype::kUint8 || h.dtype == NpyDtype::kInt64)) {
        std::vector<int32_t> y;
        for (int64_t i = 0; i < h.shape[0]; ++i)
          y.push_back(
              checked_label(npy_value(h, f.data(), i), csv.max_classes, path, i, "--max-classes"));
        s.label_histogram = histogram(y, csv.max_classes);
      }
      break;
    }
    case SourceFormat::kShard: {
      if (is_token_shard(path)) {
        const TokenShard t(path, false);
        const ShardInfo& si = t.info();
        s.dtype = dtype_name(si.dtype);
        s.shape = {si.count};
        s.count = si.count;
        s.target = target_name(si.target);
        s.shard_version = si.version;
        s.vocab_kind = vocab_kind_name(t.vocabulary().kind);
        s.vocab_size = t.vocabulary().size;
        const std::vector<int64_t> bad = t.bad_chunks();
        s.checksum_ok = bad.empty();
        s.checksum = bad.empty() ? fmt::format("CRC32C ok ({} chunks)", si.num_chunks)
                                 : fmt::format("CRC32C MISMATCH in {} of {} chunks: {}", bad.size(),
                                               si.num_chunks, fmt::join(bad, ", "));
        break;
      }
      ShardSource src(path, {ShardVerify::kNone, std::nullopt});
      const ShardInfo& si = src.info();
      s.dtype = dtype_name(si.dtype);
      s.shape = {si.count};
      s.shape.insert(s.shape.end(), si.shape.begin(), si.shape.end());
      s.count = si.count;
      s.target = si.target == ShardTarget::kFloat
                     ? fmt::format("{} x {}", target_name(si.target), si.target_numel)
                     : target_name(si.target);
      s.shard_version = si.version;
      if (si.target == ShardTarget::kClassLabel) {
        std::vector<int32_t> y(size_t(si.count));
        for (int64_t i = 0; i < si.count; ++i) std::memcpy(&y[size_t(i)], src.record(i), 4);
        s.label_histogram = histogram(y, si.num_classes, &s.labels_out_of_range);
      }
      std::vector<int64_t> bad = src.bad_chunks();
      s.checksum_ok = bad.empty();
      s.checksum = bad.empty() ? fmt::format("CRC32C ok ({} chunks)", si.num_chunks)
                               : fmt::format("CRC32C MISMATCH in {} of {} chunks: {}", bad.size(),
                                             si.num_chunks, fmt::join(bad, ", "));
      break;
    }
  }
  return s;
}

}  // namespace loom::data
