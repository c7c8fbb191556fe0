#include "loom/data/sources/validation_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "loom/core/error.h"
#include "loom/data/loader/loader.h"
#include "loom/plan/data_reader.h"

namespace loom::data {
namespace {

// A data set whose single feature is the record's id, so a batch names the records it holds.
Dataset numbered(int64_t n) {
  Dataset d;
  d.name = "numbered";
  d.count = n;
  d.sample_shape = {1};
  d.num_classes = 2;
  d.features.resize(size_t(n));
  d.labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    d.features[size_t(i)] = float(i);
    d.labels[size_t(i)] = int32_t(i % 2);
  }
  return d;
}

TEST(ValidationSplit, IsDisjointCompleteSizedBySeedAndFraction) {
  const ValidationSplit a = split_for_validation(1000, 0.1, 7);
  EXPECT_EQ(a.validation.size(), 100u);
  EXPECT_EQ(a.train.size(), 900u);
  std::vector<int64_t> all = a.train;
  all.insert(all.end(), a.validation.begin(), a.validation.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(1000);
  std::iota(want.begin(), want.end(), int64_t(0));
  EXPECT_EQ(all, want);  // disjoint, and every record in one of them
  EXPECT_TRUE(std::is_sorted(a.train.begin(), a.train.end()));
  // Not a block at either end: drawn from the whole set.
  EXPECT_LT(a.validation.front(), 100);
  EXPECT_GT(a.validation.back(), 900);

  EXPECT_EQ(split_for_validation(1000, 0.1, 7).validation, a.validation);  // same seed
  const ValidationSplit b = split_for_validation(1000, 0.1, 8);
  EXPECT_NE(b.validation, a.validation);  // another seed
  EXPECT_EQ(b.validation.size(), 100u);
  // Rounded to the nearest record; 0 holds nothing out.
  EXPECT_EQ(split_for_validation(1000, 0.0125, 7).validation.size(), 13u);
  const ValidationSplit none = split_for_validation(1000, 0, 7);
  EXPECT_TRUE(none.validation.empty());
  EXPECT_EQ(none.train, want);
}

TEST(ValidationSplit, SubsetSourceGathersTheBaseRecordsAndMaterialises) {
  const Dataset d = numbered(50);
  auto base = std::make_shared<DatasetSource>(d);
  const ValidationSplit s = split_for_validation(50, 0.2, 3);
  const SubsetSource train(base, s.train);
  EXPECT_EQ(train.count(), 40);
  const int64_t idx[3] = {0, 17, 39};
  float x[3];
  int32_t y[3];
  train.gather(idx, 3, x, y);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(int64_t(x[k]), s.train[size_t(idx[k])]);
    EXPECT_EQ(y[k], int32_t(s.train[size_t(idx[k])] % 2));
  }
  const Dataset v = materialise(SubsetSource(base, s.validation), "v");
  ASSERT_EQ(v.count, 10);
  for (int64_t i = 0; i < v.count; ++i)
    EXPECT_EQ(int64_t(v.features[size_t(i)]), s.validation[size_t(i)]);
}

// Two ranks each build the split from the seed and load their shards of every global batch:
// together they train on every record of the training part once an epoch, never on one that
// is held out, and never on the same record twice.
TEST(ValidationSplit, LoaderRanksTrainOnDisjointShardsOfTheTrainingPartOnly) {
  const Dataset d = numbered(1000);
  auto base = std::make_shared<DatasetSource>(d);
  std::set<int64_t> seen;
  int64_t total = 0;
  std::vector<int64_t> held[2];
  for (int rank = 0; rank < 2; ++rank) {
    ValidationSplit s = split_for_validation(1000, 0.2, 11);
    held[rank] = s.validation;
    LoaderOptions o;
    o.global_batch = 40;
    o.rank = rank;
    o.world = 2;
    o.seed = 11;
    o.prefetch = 0;
    Loader loader(std::make_shared<SubsetSource>(base, std::move(s.train)), o);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      loader.start_epoch(epoch);
      Batch b;
      while (loader.next(b))
        for (int64_t i = 0; i < b.size; ++i) {
          const int64_t id = int64_t(b.x[i]);
          EXPECT_FALSE(std::binary_search(held[rank].begin(), held[rank].end(), id)) << id;
          if (epoch == 0) seen.insert(id), ++total;
        }
    }
  }
  EXPECT_EQ(held[0], held[1]);
  EXPECT_EQ(total, 800);         // 20 steps x 40
  EXPECT_EQ(seen.size(), 800u);  // no record twice in the epoch, across the ranks
}

TEST(ValidationSplit, BadValuesNameTheKeyAndLine) {
  auto error_of = [](const std::string& text) {
    try {
      plan::read_validation_choice(Config::from_string(text, "v.toml"));
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.code(), ExitCode::kBadInput);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  for (const char* bad : {"-0.1", "1.0", "1", "2.5", "nan", "inf"}) {
    const std::string e = error_of(std::string("[data]\nvalidation = ") + bad + "\n");
    EXPECT_NE(e.find("v.toml:2"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("data.validation"), std::string::npos) << e;
    EXPECT_NE(e.find("outside [0, 1)"), std::string::npos) << e;
  }
  EXPECT_NE(error_of("[data]\nvalidation = [0.1]\n").find("data.validation"), std::string::npos);
  EXPECT_NE(error_of("[data]\nvalidation = true\n").find("data.validation"), std::string::npos);
  EXPECT_NE(error_of("[data]\nvalidation = \"\"\n").find("empty path"), std::string::npos);
  EXPECT_EQ(error_of("[data]\nvalidation = 0.1\n"), "(no error)");
  EXPECT_EQ(plan::read_validation_choice(Config::from_string("[data]\nvalidation = 0\n")).enabled(),
            false);
  const ValidationChoice file =
      plan::read_validation_choice(Config::from_string("[data]\nvalidation = \"v.shard\"\n"));
  EXPECT_EQ(file.shards, "v.shard");
  EXPECT_TRUE(file.enabled());
}

}  // namespace
}  // namespace loom::data
