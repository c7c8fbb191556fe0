#include "loom/data/sources/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/idx.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

// A tiny Fashion-MNIST look-alike: n images of 2x3 pixels, labels i % 10.
void write_fake(const std::string& dir, const std::string& prefix, int n, bool gzip,
                int bad_label_at = -1, int label_count = -1) {
  IdxArray img, lab;
  img.dims = {n, 2, 3};
  for (int i = 0; i < n * 6; ++i) img.bytes.push_back(uint8_t((i * 37) % 256));
  lab.dims = {label_count < 0 ? n : label_count};
  for (int i = 0; i < lab.dims[0]; ++i)
    lab.bytes.push_back(uint8_t(i == bad_label_at ? 10 : i % 10));
  std::string ext = gzip ? ".gz" : "";
  write_idx(dir + "/" + prefix + "-images-idx3-ubyte" + ext, img, gzip);
  write_idx(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, lab, gzip);
}

std::string load_error(const std::string& dir, bool train = true) {
  try {
    load_fashion_mnist(dir, train, std::nullopt, nullptr);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Dataset, ByteStatisticsMatchesHandComputed) {
  // Pixels 0 and 255: x/255 = {0, 1}, mean 0.5, unbiased variance (0.25+0.25)/1 = 0.5.
  uint8_t px[2] = {0, 255};
  Normalisation n = byte_statistics(px, 2);
  EXPECT_FLOAT_EQ(n.mean, 0.5f);
  EXPECT_FLOAT_EQ(n.stddev, std::sqrt(0.5f));
}

TEST(Dataset, LoadsFakeSetAndNormalises) {
  testing::TempDir t;
  write_fake(t.path(), "train", 20, true);
  write_fake(t.path(), "t10k", 10, false);
  Normalisation computed;
  Dataset tr = load_fashion_mnist(t.path(), true, std::nullopt, &computed);
  EXPECT_EQ(tr.count, 20);
  EXPECT_EQ(tr.sample_shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(tr.sample_numel(), 6);
  EXPECT_EQ(tr.num_classes, 10);
  ASSERT_EQ(tr.features.size(), 120u);
  EXPECT_EQ(tr.labels[13], 3);
  // Scalar reference: mean and unbiased std of x/255 in double.
  double sum = 0, ss = 0;
  for (int i = 0; i < 120; ++i) sum += ((i * 37) % 256) / 255.0;
  double mean = sum / 120;
  for (int i = 0; i < 120; ++i) ss += std::pow(((i * 37) % 256) / 255.0 - mean, 2);
  double sd = std::sqrt(ss / 119);
  EXPECT_NEAR(computed.mean, mean, 1e-6);
  EXPECT_NEAR(computed.stddev, sd, 1e-6);
  EXPECT_NEAR(tr.features[7], ((7 * 37 % 256) / 255.0 - mean) / sd, 1e-5);
  // The test set uses the training set's statistics when given them.
  Dataset te = load_fashion_mnist(t.path(), false, computed, nullptr);
  EXPECT_EQ(te.count, 10);
  EXPECT_NEAR(te.features[1], ((37 % 256) / 255.0 - mean) / sd, 1e-5);
}

TEST(Dataset, MissingFolderSaysHowToInstall) {
  std::string msg = load_error("/nonexistent/fmnist");
  EXPECT_THAT(msg, HasSubstr("apt-get install dataset-fashion-mnist"));
  EXPECT_THAT(msg, HasSubstr("data.dir"));
  EXPECT_THAT(msg, HasSubstr("/nonexistent/fmnist"));
}

TEST(Dataset, MissingFileSaysHowToInstall) {
  testing::TempDir t;
  write_fake(t.path(), "t10k", 10, false);
  std::string msg = load_error(t.path(), true);
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte"));
  EXPECT_THAT(msg, HasSubstr("apt-get install dataset-fashion-mnist"));
}

TEST(Dataset, LabelOutOfRangeNamesFileAndRecord) {
  testing::TempDir t;
  write_fake(t.path(), "train", 20, true, /*bad_label_at=*/17);
  std::string msg = load_error(t.path());
  EXPECT_THAT(msg, HasSubstr("train-labels-idx1-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("label 10 of record 17"));
}

TEST(Dataset, CountMismatchNamesBothFiles) {
  testing::TempDir t;
  write_fake(t.path(), "train", 20, false, -1, /*label_count=*/19);
  std::string msg = load_error(t.path());
  EXPECT_THAT(msg, HasSubstr("20 images"));
  EXPECT_THAT(msg, HasSubstr("19 labels"));
  EXPECT_THAT(msg, HasSubstr("train-labels-idx1-ubyte"));
}

TEST(Dataset, RealFashionMnistIfInstalled) {
  if (!core::file_exists(std::string(kDefaultFashionMnistDir) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  Normalisation n;
  Dataset te = load_fashion_mnist(kDefaultFashionMnistDir, false, std::nullopt, &n);
  EXPECT_EQ(te.count, 10000);
  EXPECT_EQ(te.sample_shape, (std::vector<int64_t>{1, 28, 28}));
  std::vector<int> hist(10, 0);
  for (int32_t y : te.labels) ++hist[size_t(y)];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(hist[size_t(c)], 1000);  // the test set is balanced
  EXPECT_NEAR(n.mean, 0.2868, 2e-3);  // published statistics of Fashion-MNIST
  EXPECT_NEAR(n.stddev, 0.3524, 2e-3);
}

}  // namespace
}  // namespace loom::data
