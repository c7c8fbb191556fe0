// Training on samples given in memory (TrainOptions::train_data, test_data: the Python package's
// loom.train) against the same samples written as shards: the loader sees the same records in
// the same order, so the runs agree bit for bit; the kept results (metrics lines, summary,
// model) are what the run directory would hold; keys naming data files are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/nn/graph/model.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/trained_model.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

using loom::data::testing::TempDir;

// n samples of 6 features around one of 3 centres, their class the centre's.
data::Dataset blobs(int n, uint64_t seed) {
  data::Dataset d;
  d.name = "blobs";
  d.count = n;
  d.sample_shape = {6};
  d.num_classes = 3;
  Rng rng(seed, 0, RngPurpose::kTest);
  for (int i = 0; i < n; ++i) {
    const int32_t c = i % 3;
    d.labels.push_back(c);
    for (int k = 0; k < 6; ++k)
      d.features.push_back(float((k % 3 == c ? 1.5 : 0.0) + rng.uniform() - 0.5));
  }
  return d;
}

void write_shard(const data::Dataset& d, const std::string& path) {
  data::ShardWriter w(
      path, data::ShardSpec(data::ShardDtype::kFloat32, d.sample_shape, d.num_classes, d.count));
  for (int64_t i = 0; i < d.count; ++i) w.append(d.labels[size_t(i)], &d.features[size_t(i * 6)]);
  w.finish();
}

Config blob_run() {
  Config cfg = loom::testing::tiny_run(2, 8, 0);
  cfg.set("model", std::string("mlp"));
  cfg.set_override("mlp.hidden=[12]");
  cfg.set("epochs", int64_t(2));
  cfg.set("eval", true);
  cfg.set("train.log_every", int64_t(5));
  return cfg;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(InMemoryTraining, EqualsTheSameSamplesReadFromShards) {
  TempDir dir;
  const data::Dataset train = blobs(96, 1), test = blobs(30, 2);
  write_shard(train, dir.file("train.shard"));
  write_shard(test, dir.file("test.shard"));

  Config files = blob_run();
  files.set("data.train_shards", dir.file("train.shard"));
  files.set("data.test_shards", dir.file("test.shard"));
  files.set("output.dir", dir.file("run"));
  const TrainResult a = run_training(plan::read_run_plan(files));

  TrainOptions o;
  o.train_data = std::make_shared<data::DatasetSource>(train);
  o.test_data = std::make_shared<data::Dataset>(test);
  o.keep_results = true;
  const TrainResult b = run_training(plan::read_run_plan(blob_run()), o);

  ASSERT_FALSE(a.final_params.empty());
  EXPECT_EQ(a.final_params, b.final_params);
  EXPECT_EQ(a.test_acc, b.test_acc);
  EXPECT_EQ(a.test_loss, b.test_loss);
  EXPECT_GT(b.test_acc, 0.6);  // three classes: 0.33 by guessing
  EXPECT_TRUE(b.output_dir.empty());

  // The kept lines are metrics.jsonl's (figures equal, timings aside), step lines included
  // although output.dir is "".
  std::vector<nlohmann::json> written;
  std::istringstream lines(read(dir.file("run/metrics.jsonl")));
  for (std::string line; std::getline(lines, line);) written.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(b.metrics_lines.size(), written.size());
  ASSERT_GT(written.size(), 2u);
  for (size_t i = 0; i < written.size(); ++i) {
    const nlohmann::json kept = nlohmann::json::parse(b.metrics_lines[i]);
    for (const char* key : {"kind", "epoch", "train_loss", "train_acc", "format_version"})
      EXPECT_EQ(kept.value(key, nlohmann::json()), written[i].value(key, nlohmann::json()))
          << key << " of line " << i;
  }
  const nlohmann::json summary = nlohmann::json::parse(b.summary_json);
  const nlohmann::json file_summary = nlohmann::json::parse(read(dir.file("run/summary.json")));
  EXPECT_EQ(summary["params_fnv1a64"], file_summary["params_fnv1a64"]);
  EXPECT_EQ(summary["format_version"], file_summary["format_version"]);

  // The kept model is the one model.safetensors loads as.
  ASSERT_NE(b.model, nullptr);
  TrainedModel loaded = load_trained_model(dir.file("run"), cpu_backend());
  const nn::StepInfo eval{.training = false};
  const float* x = test.features.data();
  const float* y1 = b.model->model->forward(x, test.count, eval);
  std::vector<float> kept(y1, y1 + test.count * 3);
  const float* y2 = loaded.model->forward(x, test.count, eval);
  EXPECT_EQ(0, std::memcmp(kept.data(), y2, kept.size() * sizeof(float)));
  EXPECT_EQ(b.model->steps, loaded.steps);
}

TEST(InMemoryTraining, KeysNamingDataFilesAreRefused) {
  const data::Dataset train = blobs(48, 1);
  for (const char* key : {"data.dir", "data.train_shards", "data.test_shards"}) {
    Config cfg = blob_run();
    cfg.set(key, std::string("/nowhere"), "test.toml:3");
    TrainOptions o;
    o.train_data = std::make_shared<data::DatasetSource>(train);
    try {
      run_training(plan::read_run_plan(cfg), o);
      ADD_FAILURE() << key << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("test.toml:3"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace loom::train
