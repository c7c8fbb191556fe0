// Bad inputs that must end in an InputError (or ConfigError) naming the file and the problem:
// huge labels, overflowing shapes, negative options, files whose magic does not match, test
// sets that do not fit the training set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/csv.h"
#include "loom/data/formats/npy.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/sources/set_checks.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <class F>
std::string bad_input_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// int64 labels of 2e8 and 2e9: inspect checks them as convert does, instead of sizing a
// histogram by them (1.7 GB, or std::bad_alloc).
TEST(BadInput, InspectBoundsHugeInt64Labels) {
  TempDir t;
  for (int64_t big : {int64_t(200000000), int64_t(2000000000), int64_t(1) << 40}) {
    const std::string y = t.file("y.npy");
    const std::vector<int64_t> labels = {1, 0, big, 2};
    write_npy(y, NpyDtype::kInt64, {4}, labels.data());
    const std::string e = bad_input_error([&] { inspect_file(y); });
    EXPECT_THAT(e, HasSubstr(y + ": record 2: label"));
    EXPECT_THAT(e, HasSubstr("--max-classes"));
    // Convert says the same.
    const std::string x = t.file("x.npy");
    const std::vector<float> f(8, 0.5f);
    write_npy(x, NpyDtype::kFloat32, {4, 2}, f.data());
    ConvertOptions o;
    o.labels = y;
    EXPECT_THAT(bad_input_error([&] { convert_to_shard(x, t.file("o.shard"), o); }),
                HasSubstr("record 2: label"));
  }
  const std::string y = t.file("neg.npy");
  const std::vector<int64_t> labels = {1, -3};
  write_npy(y, NpyDtype::kInt64, {2}, labels.data());
  EXPECT_THAT(bad_input_error([&] { inspect_file(y); }),
              HasSubstr("record 1: label -3 is not a class"));
}

TEST(BadInput, ACsvLabelAboveMaxClassesIsRefused) {
  TempDir t;
  const std::string csv = t.file("big.csv");
  write_bytes(csv, "0.5,1\n0.25,16000000\n");
  const std::string e = bad_input_error([&] { convert_to_shard(csv, t.file("o.shard"), {}); });
  EXPECT_THAT(e, HasSubstr(csv + ":2: label 16000000 is outside [0, 65536)"));
  EXPECT_THAT(e, HasSubstr("--max-classes"));
  EXPECT_THAT(bad_input_error([&] { inspect_file(csv); }), HasSubstr("label 16000000"));
  // Raised on purpose, it converts.
  ConvertOptions o;
  o.max_classes = 16000001;
  EXPECT_EQ(convert_to_shard(csv, t.file("o.shard"), o).num_classes, 16000001);
}

// (0, 2^40, 2^40): no values at all, but a record of 2^80 overflows the record size.
TEST(BadInput, AnNpyShapeWhoseRecordOverflowsIsRefusedAtConvert) {
  TempDir t;
  const std::string x = t.file("x.npy"), y = t.file("y.npy");
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }";
  std::string head = std::string("\x93NUMPY\x01\x00", 8);
  std::string padded = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
  head += char(padded.size() & 0xff);
  head += char(padded.size() >> 8);
  write_bytes(x, head + padded);
  write_npy(y, NpyDtype::kInt64, {0}, nullptr);
  ConvertOptions o;
  o.labels = y;
  const std::string e = bad_input_error([&] { convert_to_shard(x, t.file("o.shard"), o); });
  EXPECT_THAT(e, HasSubstr(x));
  EXPECT_THAT(e, HasSubstr("absurd .npy shape"));
  EXPECT_FALSE(core::file_exists(t.file("o.shard")));
  // The shard writer refuses what its reader would, whatever the source.
  EXPECT_THAT(bad_input_error([&] {
                ShardWriter(t.file("w.shard"),
                            {ShardDtype::kFloat32, {int64_t(1) << 40, int64_t(1) << 40}, 10, 0, 0});
              }),
              HasSubstr("a shard record holds 1 to 2^32 values"));
  EXPECT_THAT(bad_input_error([&] {
                ShardWriter(t.file("w.shard"), {ShardDtype::kFloat32, {4, 0}, 10, 0, 0});
              }),
              HasSubstr("dimension 1 is 0"));
}

TEST(BadInput, NegativeClassesAndChunkRecordsAreRefused) {
  TempDir t;
  const std::string csv = t.file("a.csv");
  write_bytes(csv, "0.5,1\n0.25,0\n");
  ConvertOptions o;
  o.num_classes = -3;
  EXPECT_THAT(bad_input_error([&] { convert_to_shard(csv, t.file("o.shard"), o); }),
              HasSubstr("--classes -3"));
  o = {};
  o.chunk_records = -1;
  EXPECT_THAT(bad_input_error([&] { convert_to_shard(csv, t.file("o.shard"), o); }),
              HasSubstr("--chunk-records -1"));
  EXPECT_FALSE(core::file_exists(t.file("o.shard")));
}

// A binary file is told apart by its magic and its name, never read as CSV; its bytes are
// shown escaped.
TEST(BadInput, BadMagicIsNamedByFormatWithEscapedBytes) {
  TempDir t;
  const std::string junk = std::string("\x93NUMPZ\x01\x00\xff\x07", 10) + std::string(60, '\x01');
  for (const char* name : {"x.npy", "x.shard", "x.idx", "train-images-idx3-ubyte", "x.bin"}) {
    const std::string p = t.file(name);
    write_bytes(p, junk);
    const std::string e = bad_input_error([&] { inspect_file(p); });
    EXPECT_THAT(e, HasSubstr(p)) << name;
    EXPECT_THAT(e, HasSubstr("\\x93NUMPZ\\x01\\x00\\xff\\x07")) << name;
    EXPECT_THAT(e, Not(HasSubstr("CSV record"))) << name;
    EXPECT_THAT(e, Not(HasSubstr("column"))) << name;
    for (char c : e) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << name << ": raw byte in " << e;
  }
  EXPECT_THAT(bad_input_error([&] { inspect_file(t.file("x.npy")); }),
              HasSubstr("not a NumPy .npy file"));
  EXPECT_THAT(bad_input_error([&] { inspect_file(t.file("x.idx")); }),
              HasSubstr("not an IDX file"));
  EXPECT_THAT(bad_input_error([&] { inspect_file(t.file("x.bin")); }),
              HasSubstr("not a format loom reads"));
  // Text with a stray control byte in a cell: the cell is shown escaped.
  const std::string csv = t.file("a.csv");
  write_bytes(csv, "0.5,1\n0.2\xc3\x28,0\n");
  EXPECT_THAT(bad_input_error([&] { inspect_file(csv); }), HasSubstr("'0.2\\xc3('"));
}

TEST(BadInput, AStructuredNpyDtypeIsNamed) {
  TempDir t;
  const std::string p = t.file("rec.npy");
  const std::string dict =
      "{'descr': [('x', '<f4'), ('y', '<i8')], 'fortran_order': False, 'shape': (1,), }";
  std::string padded = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += char(padded.size() & 0xff);
  bytes += char(padded.size() >> 8);
  write_bytes(p, bytes + padded + std::string(12, '\0'));
  const std::string e = bad_input_error([&] { inspect_file(p); });
  EXPECT_THAT(e, HasSubstr("structured dtype"));
  EXPECT_THAT(e, Not(HasSubstr("has no 'descr'")));
}

// The checks run_training makes before it trains, on in-memory sets.
TEST(BadInput, TestSetsMustFitTheTrainingSet) {
  Dataset train;
  train.count = 4;
  train.sample_shape = {1, 2, 2};
  train.num_classes = 3;
  train.features.assign(16, 0.f);
  train.labels = {0, 1, 2, 0};
  DatasetSource src(train);
  Dataset test = train;
  EXPECT_NO_THROW(check_data_sets(src, "tr", &test, "te", kMaxClasses, "default"));
  EXPECT_NO_THROW(check_data_sets(src, "tr", nullptr, "te", kMaxClasses, "default"));

  Dataset zero = test;
  zero.sample_shape = {1, 0, 2};
  zero.features.clear();
  EXPECT_THAT(bad_input_error([&] { check_data_sets(src, "tr", &zero, "te", kMaxClasses, "d"); }),
              HasSubstr("te: test samples of shape 1x0x2 differ"));
  Dataset classes = test;
  classes.num_classes = 4951;
  EXPECT_THAT(
      bad_input_error([&] { check_data_sets(src, "tr", &classes, "te", kMaxClasses, "d"); }),
      HasSubstr("4951 classes"));
  Dataset nan = test;
  nan.features[13] = NAN;
  EXPECT_THAT(bad_input_error([&] { check_data_sets(src, "tr", &nan, "te", kMaxClasses, "d"); }),
              HasSubstr("te: test record 3 holds a NaN or Inf"));
  Dataset empty = test;
  empty.count = 0;
  EXPECT_THAT(bad_input_error([&] { check_data_sets(src, "tr", &empty, "te", kMaxClasses, "d"); }),
              HasSubstr("te: the test set is empty"));
  EXPECT_THAT(bad_input_error([&] { check_data_sets(src, "tr", &test, "te", 2, "cfg.toml:4"); }),
              HasSubstr("tr: 3 classes, more than data.max_classes = 2 (cfg.toml:4)"));
}

}  // namespace
}  // namespace loom::data
