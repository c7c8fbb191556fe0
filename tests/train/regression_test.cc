// Regression end to end: shards of float targets (shard format version 2) train a model with
// loss.type = "mse" over two workers; the test loss is the mean squared error and falls far
// below the targets' variance; the model file says it is a regression model, and evaluating it
// gives the run's own figure. loss.type must fit the data, else the run stops before output.dir.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/evaluation.h"
#include "loom/train/trained_model.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

// n samples of 4 features in [-1, 1] and two targets, y0 = 2 x0 - x1 + 0.5 and
// y1 = 3 x2 x3 (a product: a linear model cannot fit it, a hidden layer can approximate it).
void write_regression(const std::string& path, int n, uint64_t seed, double* variance) {
  data::ShardSpec spec{data::ShardDtype::kFloat32, {4}, 0, n};
  spec.target = data::ShardTarget::kFloat;
  spec.target_numel = 2;
  data::ShardWriter w(path, spec);
  Rng rng(seed, 0, RngPurpose::kTest);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    float x[4];
    for (float& v : x) v = float(rng.uniform() * 2 - 1);
    const float t[2] = {2 * x[0] - x[1] + 0.5f, 3 * x[2] * x[3]};
    for (float v : t) sum += v, sum2 += double(v) * v;
    w.append_targets(t, x);
  }
  w.finish();
  if (variance) *variance = sum2 / (2.0 * n) - (sum / (2.0 * n)) * (sum / (2.0 * n));
}

constexpr const char* kRegressionGraph = R"(
[[layer]]
type = "linear"
out = 32
[[layer]]
type = "tanh"
[[layer]]
type = "linear"
out = 2
)";

Config regression_run(const TempDir& dir, double* variance) {
  write_regression(dir.file("train.shard"), 2048, 1, variance);
  write_regression(dir.file("test.shard"), 512, 2, nullptr);
  Config cfg = Config::from_string(kRegressionGraph, "regression.toml");
  const Config base = testing::tiny_run(2, 32, 0);
  for (const auto& [key, value] : base.values())
    if (key.rfind("mlp.", 0) != 0 && key != "max_steps") cfg.set(key, value.value, value.where);
  cfg.set("eval", true);
  cfg.set("epochs", int64_t(8));
  cfg.set("optim.lr", 0.05);
  cfg.set("data.train_shards", dir.file("train.shard"));
  cfg.set("data.test_shards", dir.file("test.shard"));
  cfg.set("loss.type", std::string("mse"));
  return cfg;
}

TEST(Regression, MseTrainsOnFloatTargetsAndTheModelFileSaysSo) {
  TempDir dir;
  double variance = 0;
  Config cfg = regression_run(dir, &variance);
  cfg.set("output.dir", dir.file("run"));
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  ASSERT_GT(variance, 0.5);
  // Accuracy means nothing for regression: not reported.
  EXPECT_LT(r.test_acc, 0);
  ASSERT_GE(r.test_loss, 0);
  EXPECT_LT(r.test_loss, 0.05 * variance) << "variance of the targets " << variance;
  // The first epoch's training loss is well above the last's: it learned.
  ASSERT_GE(r.epochs.size(), 2u);
  EXPECT_LT(r.train_loss, 0.5 * r.epochs.front().train_loss);

  TrainedModel m = load_trained_model(dir.file("run"), cpu_backend());
  EXPECT_EQ(m.loss, nn::LossKind::kMse);
  std::string from;
  const data::Dataset set = load_eval_set(m, "", &from);
  EXPECT_EQ(set.target_numel, 2);
  const EvalResult e = evaluate_model(*m.model, set);
  EXPECT_TRUE(e.regression);
  EXPECT_NEAR(e.loss, r.test_loss, 1e-6 * r.test_loss);
}

TEST(Regression, TheLossMustFitTheData) {
  TempDir dir;
  Config cfg = regression_run(dir, nullptr);
  cfg.set("output.dir", dir.file("a"));
  cfg.set("loss.type", std::string("cross_entropy"));
  try {
    run_training(plan::read_run_plan(cfg));
    ADD_FAILURE() << "cross-entropy on float targets";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("set loss.type = \"mse\""), std::string::npos) << e.what();
  }
  cfg.set("loss.type", std::string("huber"));
  EXPECT_THROW(run_training(plan::read_run_plan(cfg)), ConfigError);
  cfg.set("loss.type", std::string("mse"));
  cfg.set("loss.label_smoothing", 0.1);
  EXPECT_THROW(run_training(plan::read_run_plan(cfg)), ConfigError);
  EXPECT_FALSE(fs::exists(dir.file("a")));

  // mse on Fashion-MNIST's class labels.
  Config labels = testing::tiny_run(1, 32, 2);
  labels.set("loss.type", std::string("mse"));
  try {
    run_training(plan::read_run_plan(labels));
    ADD_FAILURE() << "mse on class labels";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("needs float targets"), std::string::npos) << e.what();
  }
}

// A test set whose targets differ in number from the training set's is refused by name.
TEST(Regression, TestSetWithOtherTargetsIsRefused) {
  TempDir dir;
  Config cfg = regression_run(dir, nullptr);
  data::ShardSpec spec{data::ShardDtype::kFloat32, {4}, 0, 1};
  spec.target = data::ShardTarget::kFloat;
  spec.target_numel = 3;
  {
    data::ShardWriter w(dir.file("three.shard"), spec);
    const float x[4] = {0, 0, 0, 0}, t[3] = {1, 2, 3};
    w.append_targets(t, x);
    w.finish();
  }
  cfg.set("data.test_shards", dir.file("three.shard"));
  try {
    run_training(plan::read_run_plan(cfg));
    ADD_FAILURE() << "3 targets accepted against 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("3 float targets per sample"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom::train
