// read_features: a trained model's inputs from IDX, NPY and CSV, their shapes checked against
// the model's and bytes normalised as the training data was.
#include "loom/data/formats/feature_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/data/formats/idx.h"
#include "loom/data/formats/npy.h"
#include "loom/data/formats/shard_writer.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& path, const std::vector<int64_t>& shape,
                     std::optional<Normalisation> norm = Normalisation{0.5f, 0.25f}) {
  try {
    read_features(path, shape, norm, {});
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << path;
  return "";
}

TEST(FeatureFile, IdxBytesAreNormalisedAsTheTrainingDataWas) {
  testing::TempDir t;
  IdxArray a;
  a.dims = {3, 2, 2};
  for (int i = 0; i < 12; ++i) a.bytes.push_back(uint8_t(i * 20));
  write_idx(t.file("x.idx"), a, false);
  const Normalisation norm{0.5f, 0.25f};
  // The model takes 1x2x2: the file's 2x2 records fit with the leading 1 left out.
  FeatureArray f = read_features(t.file("x.idx"), {1, 2, 2}, norm, {});
  EXPECT_EQ(f.count, 3);
  EXPECT_EQ(f.sample_shape, (std::vector<int64_t>{1, 2, 2}));
  ASSERT_EQ(f.values.size(), 12u);
  EXPECT_EQ(f.values[5], normalise_byte(100, byte_affine(norm)));
  EXPECT_NEAR(f.values[5], (100 / 255.0 - 0.5) / 0.25, 1e-5);
  EXPECT_THAT(error_of(t.file("x.idx"), {1, 2, 2}, std::nullopt),
              HasSubstr("no pixel normalisation"));
  EXPECT_THAT(error_of(t.file("x.idx"), {4, 1}), HasSubstr("records of shape 2x2"));
  EXPECT_THAT(error_of(t.file("x.idx"), {1, 3, 3}), HasSubstr("the model takes 1x3x3"));
}

TEST(FeatureFile, NpyFloatsAreTakenAsTheyAreAndFlatRecordsFit) {
  testing::TempDir t;
  const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8.5f};
  write_npy(t.file("x.npy"), NpyDtype::kFloat32, {2, 4}, x);
  FeatureArray f = read_features(t.file("x.npy"), {1, 2, 2}, std::nullopt, {});
  EXPECT_EQ(f.count, 2);
  EXPECT_EQ(f.values, std::vector<float>(x, x + 8));
  EXPECT_THAT(error_of(t.file("x.npy"), {3}), HasSubstr("4 values"));
  const float bad[2] = {1, std::nanf("")};
  write_npy(t.file("nan.npy"), NpyDtype::kFloat32, {1, 2}, bad);
  EXPECT_THAT(error_of(t.file("nan.npy"), {2}), HasSubstr("record 0: value 1 is nan"));
}

TEST(FeatureFile, CsvColumnsAreAllFeatures) {
  testing::TempDir t;
  std::ofstream(t.file("x.csv")) << "a,b,c\n1,2,3\n4,5,6.5\n";
  CsvOptions o;
  o.header = true;
  FeatureArray f = read_features(t.file("x.csv"), {3}, std::nullopt, o);
  EXPECT_EQ(f.count, 2);
  EXPECT_EQ(f.values, (std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
  std::ofstream(t.file("y.csv")) << "1,2\n";
  EXPECT_THAT(error_of(t.file("y.csv"), {3}), HasSubstr("records of shape 2 (2 values)"));
}

TEST(FeatureFile, AShardIsTrainingDataNotInputs) {
  testing::TempDir t;
  ShardWriter w(t.file("a.shard"), {ShardDtype::kFloat32, {2}, 2, 1});
  const float x[2] = {1, 2};
  w.append(0, x);
  w.finish();
  EXPECT_THAT(error_of(t.file("a.shard"), {2}), HasSubstr("loom eval --data"));
}

}  // namespace
}  // namespace loom::data
