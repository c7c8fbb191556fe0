#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/csv.h"
#include "loom/data/formats/npy.h"
#include "loom/data/sources/shard_source.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string csv_error(const std::string& text, CsvOptions o = {}) {
  try {
    parse_csv(text.data(), text.size(), "t.csv", o);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Csv, ParsesHeaderDelimiterAndLabelColumn) {
  std::string text = "label;a;b\n2;0.5;-1e2\r\n0; 3 ;4\n\n";
  Dataset d = parse_csv(text.data(), text.size(), "t.csv", {';', true, 0, 0});
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.sample_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(d.features, (std::vector<float>{0.5f, -100.0f, 3.0f, 4.0f}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{2, 0}));
  // Default: comma, no header, label last.
  std::string t2 = "1,2,1\n3,4,0\n";
  Dataset e = parse_csv(t2.data(), t2.size(), "t.csv", {});
  EXPECT_EQ(e.features, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(e.labels, (std::vector<int32_t>{1, 0}));
}

TEST(Csv, NonNumericCellNamesLineAndColumn) {
  EXPECT_THAT(csv_error("1,2,0\n3,x4,1\n"),
              HasSubstr("t.csv:2: column 2: 'x4' is not a finite number"));
  EXPECT_THAT(csv_error("1,2,0\n3,4,1.5\n"),
              HasSubstr("t.csv:2: column 3: label '1.5' is not an integer"));
  EXPECT_THAT(csv_error("1,nan,0\n"), HasSubstr("not a finite number"));
}

TEST(Csv, WrongColumnCount) {
  EXPECT_THAT(csv_error("1,2,0\n3,4\n"), HasSubstr("t.csv:2: 2 columns, expected 3"));
  EXPECT_THAT(csv_error("a,b,c,y\n1,2,0\n", {',', true, -1, 0}),
              HasSubstr("t.csv:2: 3 columns, expected 4 (as on the header line)"));
}

TEST(Csv, LabelOutsideClassCount) {
  EXPECT_THAT(csv_error("1,2,0\n3,4,7\n", {',', false, -1, 5}),
              HasSubstr("t.csv:2: label 7 is outside [0, 5)"));
  EXPECT_THAT(csv_error("1,2,-1\n"), HasSubstr("label -1 is outside"));
}

TEST(Csv, ConvertsToFloatShard) {
  testing::TempDir t;
  write_text(t.file("a.csv"), "0.25,1.5,1\n-2,8,0\n");
  ShardInfo info = convert_to_shard(t.file("a.csv"), t.file("a.shard"), {});
  EXPECT_EQ(info.dtype, ShardDtype::kFloat32);
  ShardSource s(t.file("a.shard"));
  int64_t idx[2] = {1, 0};
  float x[4];
  int32_t y[2];
  s.gather(idx, 2, x, y);
  EXPECT_EQ(std::vector<float>(x, x + 4), (std::vector<float>{-2, 8, 0.25f, 1.5f}));
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 1);
}

std::string npy_error(const std::string& path) {
  try {
    core::MappedFile f(path);
    parse_npy_header(f.data(), f.size(), path);
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Npy, RoundTripsEachDtype) {
  testing::TempDir t;
  float f[6] = {1, 2, 3, 4, 5, 6.5f};
  double d[2] = {0.25, -3};
  uint8_t u[3] = {0, 128, 255};
  int64_t i[2] = {7, -1};
  write_npy(t.file("f.npy"), NpyDtype::kFloat32, {2, 3}, f);
  write_npy(t.file("d.npy"), NpyDtype::kFloat64, {2}, d);
  write_npy(t.file("u.npy"), NpyDtype::kUint8, {3}, u);
  write_npy(t.file("i.npy"), NpyDtype::kInt64, {2}, i);
  core::MappedFile ff(t.file("f.npy"));
  NpyHeader h = parse_npy_header(ff.data(), ff.size(), "f.npy");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(npy_value(h, ff.data(), 5), 6.5);
  core::MappedFile fd(t.file("d.npy")), fu(t.file("u.npy")), fi(t.file("i.npy"));
  EXPECT_EQ(npy_value(parse_npy_header(fd.data(), fd.size(), "d"), fd.data(), 1), -3.0);
  EXPECT_EQ(npy_value(parse_npy_header(fu.data(), fu.size(), "u"), fu.data(), 2), 255.0);
  EXPECT_EQ(npy_value(parse_npy_header(fi.data(), fi.size(), "i"), fi.data(), 1), -1.0);
}

// Regression data: --targets gives a shard of float targets (K per record), read back exactly;
// integer targets, a count that differs from the features' and --labels with --targets are
// refused naming the file.
TEST(Npy, ConvertsFloatTargetsForRegression) {
  testing::TempDir t;
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const double y[6] = {0.5, -1.5, 2.25, 8, -0.125, 3};
  write_npy(t.file("x.npy"), NpyDtype::kFloat32, {3, 2}, x);
  write_npy(t.file("y.npy"), NpyDtype::kFloat64, {3, 2}, y);
  ConvertOptions o;
  o.targets = t.file("y.npy");
  ShardInfo info = convert_to_shard(t.file("x.npy"), t.file("r.shard"), o);
  EXPECT_EQ(info.target, ShardTarget::kFloat);
  EXPECT_EQ(info.target_numel, 2);
  ShardSource s(t.file("r.shard"), {ShardVerify::kAll, std::nullopt});
  int64_t idx[2] = {2, 0};
  float tg[4], xs[4];
  int32_t lab[2];
  s.gather_targets(idx, 2, tg);
  s.gather(idx, 2, xs, lab);
  EXPECT_EQ(std::vector<float>(tg, tg + 4), (std::vector<float>{-0.125f, 3, 0.5f, -1.5f}));
  EXPECT_EQ(std::vector<float>(xs, xs + 4), (std::vector<float>{5, 6, 1, 2}));
  // Re-chunking a shard of float targets keeps them.
  ShardInfo again = convert_to_shard(t.file("r.shard"), t.file("r2.shard"), {});
  EXPECT_EQ(again.target_numel, 2);
  FileSummary sum = inspect_file(t.file("r2.shard"));
  EXPECT_EQ(sum.target, "float targets x 2");
  EXPECT_TRUE(sum.label_histogram.empty());

  const int64_t ints[3] = {0, 1, 2};
  write_npy(t.file("i.npy"), NpyDtype::kInt64, {3}, ints);
  o.targets = t.file("i.npy");
  try {
    convert_to_shard(t.file("x.npy"), t.file("bad.shard"), o);
    ADD_FAILURE() << "integer targets accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("i.npy: targets must be float32 or float64"));
  }
  const float four[4] = {1, 2, 3, 4};
  write_npy(t.file("y4.npy"), NpyDtype::kFloat32, {4}, four);
  o.targets = t.file("y4.npy");
  EXPECT_THROW(convert_to_shard(t.file("x.npy"), t.file("bad.shard"), o), InputError);
  o.labels = t.file("i.npy");
  EXPECT_THROW(convert_to_shard(t.file("x.npy"), t.file("bad.shard"), o), ConfigError);
  EXPECT_FALSE(std::ifstream(t.file("bad.shard")).good());
}

TEST(Npy, HandWrittenNumpyHeader) {
  // Exactly what numpy 1.24 writes for np.save(f, np.arange(3, dtype='<i8')).
  testing::TempDir t;
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size()) + '\0' + dict;
  for (int64_t v = 0; v < 3; ++v) file.append(reinterpret_cast<const char*>(&v), 8);
  write_text(t.file("a.npy"), file);
  core::MappedFile f(t.file("a.npy"));
  NpyHeader h = parse_npy_header(f.data(), f.size(), "a.npy");
  EXPECT_EQ(h.dtype, NpyDtype::kInt64);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(h.data_offset, 128u);
  EXPECT_EQ(npy_value(h, f.data(), 2), 2.0);
}

TEST(Npy, RejectsFortranOrderUnsupportedDtypeAndSizeMismatch) {
  testing::TempDir t;
  auto make = [&](const std::string& name, const std::string& dict, size_t data_bytes) {
    std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size()) + '\0' + dict;
    file.append(data_bytes, '\0');
    write_text(t.file(name), file);
    return t.file(name);
  };
  EXPECT_THAT(
      npy_error(make("f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16)),
      HasSubstr("Fortran-order"));
  EXPECT_THAT(
      npy_error(make("i.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 8)),
      HasSubstr("unsupported .npy dtype '<i4'"));
  EXPECT_THAT(
      npy_error(make("b.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 8)),
      HasSubstr("unsupported .npy dtype '>f4'"));
  EXPECT_THAT(
      npy_error(make("s.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 20)),
      HasSubstr("needs 24 data bytes, the file has 20 (truncated)"));
  write_text(t.file("m.npy"), "NUMPY!!!!!!!");
  EXPECT_THAT(npy_error(t.file("m.npy")), HasSubstr("wrong magic"));
}

TEST(Npy, ConvertsFeaturesAndLabelsToShard) {
  testing::TempDir t;
  uint8_t px[8] = {0, 255, 10, 20, 30, 40, 50, 60};
  int64_t lab[2] = {3, 1};
  write_npy(t.file("x.npy"), NpyDtype::kUint8, {2, 2, 2}, px);
  write_npy(t.file("y.npy"), NpyDtype::kInt64, {2}, lab);
  ConvertOptions co;
  co.labels = t.file("y.npy");
  co.num_classes = 4;
  ShardInfo info = convert_to_shard(t.file("x.npy"), t.file("a.shard"), co);
  EXPECT_EQ(info.dtype, ShardDtype::kUint8);
  EXPECT_EQ(info.shape, (std::vector<int64_t>{2, 2}));
  FileSummary s = inspect_file(t.file("a.shard"));
  EXPECT_EQ(s.label_histogram, (std::vector<int64_t>{0, 1, 0, 1}));
  int64_t bad[2] = {3, 9};
  write_npy(t.file("y2.npy"), NpyDtype::kInt64, {2}, bad);
  co.labels = t.file("y2.npy");
  EXPECT_THROW(convert_to_shard(t.file("x.npy"), t.file("b.shard"), co), InputError);
}

}  // namespace
}  // namespace loom::data
