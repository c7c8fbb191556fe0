// train.histograms: its keys, and one weights/ and one gradients/ histogram per parameter
// tensor, of the values the model's buffers hold.
#include "loom/train/model_histograms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/nn/io/model_file.h"
#include "loom/nn/layers/linear.h"
#include "loom/plan/run_keys.h"
#include "loom/plan/train_settings.h"
#include "loom/tensor/backend_registry.h"
#include "loom/train/run_settings.h"
#include "train/event_file_reader.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

TEST(ModelHistograms, KeysAreKnownWithTheirDefaultsAndOutOfRangeIsRefusedByName) {
  const Config none = Config::from_string("", "t.toml");
  EXPECT_FALSE(plan::read_histogram_options(none).enabled);
  EXPECT_EQ(plan::read_histogram_options(none).every, 100);
  const HistogramOptions on = plan::read_histogram_options(
      Config::from_string("[train]\nhistograms = true\nhistogram_every = 5\n", "t.toml"));
  EXPECT_TRUE(on.enabled);
  EXPECT_FALSE(on.due(4));
  EXPECT_TRUE(on.due(5));
  EXPECT_TRUE(on.due(10));
  EXPECT_FALSE(plan::read_histogram_options(none).due(100));  // off: never due
  for (const char* bad : {"[train]\nhistogram_every = 0\n", "[train]\nhistogram_every = -3\n",
                          "[train]\nhistograms = \"yes\"\n"}) {
    try {
      plan::read_histogram_options(Config::from_string(bad, "t.toml"));
      FAIL() << bad;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("train.histogram")) << bad;
    }
  }
  std::vector<std::string> known;
  for (const ConfigKeySpec& k : plan::train_config_keys()) known.push_back(k.key);
  EXPECT_THAT(known, ::testing::IsSupersetOf({"train.histograms", "train.histogram_every"}));
  EXPECT_THAT(plan::config_help(), ::testing::HasSubstr("train.histogram_every"));
  EXPECT_THROW(Config::from_string("[train]\nhistogram = true\n", "t.toml")
                   .check_known(plan::train_config_keys()),
               ConfigError);
}

TEST(ModelHistograms, OneWeightAndOneGradientHistogramPerParameterTensor) {
  std::vector<std::unique_ptr<nn::Layer>> layers;
  layers.push_back(std::make_unique<nn::Linear>(4, 3));
  layers.push_back(std::make_unique<nn::Linear>(3, 2));
  nn::Model model(cpu_backend(), nn::Shape{4}, 2, std::move(layers));
  // Parameters and gradients of known values: the index, and minus the index.
  const int64_t n = model.num_params();
  std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    p[size_t(i)] = float(i);
    g[size_t(i)] = -float(i);
  }
  model.backend().copy_to_device(model.params(), p.data(), p.size() * sizeof(float));
  model.backend().copy_to_device(model.grads(), g.data(), g.size() * sizeof(float));
  TempDir t;
  std::string path;
  {
    TensorBoardWriter tb(t.path());
    write_model_histograms(tb, model, 30);
    path = tb.path();
  }
  std::map<std::string, testing::DecodedEvent> by_tag;
  for (const auto& e : testing::read_events({path}))
    if (e.has_histogram) by_tag[e.tag] = e;
  const std::vector<nn::ModelTensor> tensors = nn::model_tensors(model);
  ASSERT_EQ(by_tag.size(), 2 * tensors.size());
  for (const nn::ModelTensor& tensor : tensors) {
    const double first = double(tensor.offset), last = double(tensor.offset + tensor.count - 1);
    const testing::DecodedEvent& w = by_tag.at("weights/" + tensor.name);
    EXPECT_EQ(w.step, 30);
    EXPECT_EQ(w.h_num, double(tensor.count)) << tensor.name;
    EXPECT_EQ(w.h_min, first) << tensor.name;
    EXPECT_EQ(w.h_max, last) << tensor.name;
    const testing::DecodedEvent& d = by_tag.at("gradients/" + tensor.name);
    EXPECT_EQ(d.h_num, double(tensor.count)) << tensor.name;
    EXPECT_EQ(d.h_min, -last) << tensor.name;
    EXPECT_EQ(d.h_max, -first) << tensor.name;
  }
}

}  // namespace
}  // namespace loom::train
