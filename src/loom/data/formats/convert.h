// `loom data convert` and `loom data inspect`, as library calls: any source (a Fashion-MNIST
// folder, IDX, CSV, NPY, a shard) to loom's shard format, and a summary of any data file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/data/formats/csv.h"
#include "loom/data/formats/shard_format.h"
#include "loom/data/sources/set_checks.h"

namespace loom::data {

enum class SourceFormat { kFashionMnistDir, kIdx, kCsv, kNpy, kShard };
const char* format_name(SourceFormat f);
// By content (magic bytes), a folder being a Fashion-MNIST folder; else CSV. A file named as
// one binary format (.npy, .shard, .idx, *-ubyte) without its magic, or a file that is not
// text, is an InputError that shows its first bytes escaped, never read as CSV.
SourceFormat detect_format(const std::string& path);

struct ConvertOptions {
  std::string labels;       // the labels file when SRC holds only features (IDX, NPY)
  std::string targets;      // NPY: float targets, (n,) or (n, K), instead of labels: regression
  bool test_split = false;  // a Fashion-MNIST folder: t10k instead of train
  CsvOptions csv;
  int num_classes = 0;                // 0: 10 for IDX, else max label + 1; < 0 is refused
  int64_t chunk_records = 0;          // 0: about 1 MiB per chunk; < 0 is refused
  int64_t max_classes = kMaxClasses;  // integer labels must lie below this (--max-classes)
};

// Writes DST through a temporary file and a rename; returns what it wrote.
ShardInfo convert_to_shard(const std::string& src, const std::string& dst,
                           const ConvertOptions& opts);

struct FileSummary {
  SourceFormat format = SourceFormat::kCsv;
  std::string dtype;
  std::vector<int64_t> shape;  // of the whole array (count first)
  int64_t count = 0;
  std::vector<int64_t> label_histogram;  // empty if the file holds no labels
  std::string target;                    // a shard's: "class label", "float targets x K", ...
  int shard_version = 0;                 // a shard's format version
  int64_t labels_out_of_range = 0;       // a shard's labels outside [0, its class count): corrupt
  std::string checksum;  // "ok (N chunks)", "MISMATCH in chunks ...", or "none in this format"
  bool checksum_ok = true;
  // A token shard's vocabulary: its kind ("bytes", "chars", "ids") and size; 0: not tokens.
  std::string vocab_kind;
  int64_t vocab_size = 0;
};
// Labels are checked as convert checks them (csv.max_classes bounds NPY and CSV labels), so
// the histogram stays small.
FileSummary inspect_file(const std::string& path, const CsvOptions& csv = {});

}  // namespace loom::data
