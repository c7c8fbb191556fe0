#include "loom/nn/graph/model_zoo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/nn/layers/activation.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::nn {
namespace {

std::vector<std::string> kinds(const Model& m) {
  std::vector<std::string> k;
  for (const auto& l : m.layers()) k.push_back(l->kind());
  return k;
}

const Shape kImage = {1, 28, 28};

TEST(ModelZoo, DefaultIsTheClassicMlp) {
  auto model = build_model(plan::read_model_spec(Config{}), cpu_backend(), kImage, 10);
  // 784*1024 + 1024 + 1024*1024 + 1024 + 1024*10 + 10
  EXPECT_EQ(model->num_params(), 1863690);
  EXPECT_EQ(kinds(*model), (std::vector<std::string>{"Flatten", "Linear", "ReLU", "Dropout",
                                                     "Linear", "ReLU", "Dropout", "Linear"}));
  const auto& d = dynamic_cast<const Dropout&>(*model->layers()[3]);
  EXPECT_FLOAT_EQ(d.p(), 0.5f);
  // ~11.2 MFLOP per sample forward + backward, a third of it forward.
  EXPECT_EQ(model->flops_per_sample(), 2 * (784 * 1024 + 1024 * 1024 + 1024 * 10));
}

TEST(ModelZoo, MlpWidthsDepthAndDropoutFromConfig) {
  Config cfg = Config::from_string("[mlp]\nhidden = [64, 32, 16]\ndropout = 0.0\n", "m.toml");
  auto model = build_model(plan::read_model_spec(cfg), cpu_backend(), kImage, 10);
  EXPECT_EQ(model->num_params(), 784 * 64 + 64 + 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10);
  EXPECT_EQ(kinds(*model), (std::vector<std::string>{"Flatten", "Linear", "ReLU", "Linear", "ReLU",
                                                     "Linear", "ReLU", "Linear"}));
  Config none = Config::from_string("[mlp]\nhidden = []\n");
  auto linear = build_model(plan::read_model_spec(none), cpu_backend(), {5}, 3);
  EXPECT_EQ(linear->num_params(), 5 * 3 + 3);
}

TEST(ModelZoo, CnnDefaultParameterCount) {
  Config cfg = Config::from_string("model = \"cnn\"\n");
  auto model = build_model(plan::read_model_spec(cfg), cpu_backend(), kImage, 10);
  // conv 1->32 5x5: 832; conv 32->64 5x5: 51264; dense 64*7*7 -> 1024: 3212288; 1024 -> 10: 10250
  EXPECT_EQ(model->num_params(), 832 + 51264 + 3212288 + 10250);
  EXPECT_EQ(kinds(*model),
            (std::vector<std::string>{"Conv2d", "ReLU", "MaxPool2d", "Conv2d", "ReLU", "MaxPool2d",
                                      "Flatten", "Linear", "ReLU", "Dropout", "Linear"}));
}

TEST(ModelZoo, SmallCnnRunsForward) {
  Config cfg = Config::from_string("model = \"cnn\"\n[cnn]\nchannels = [4]\nhidden = 8\n");
  auto model = build_model(plan::read_model_spec(cfg), cpu_backend(), kImage, 10);
  EXPECT_EQ(model->num_params(), (4 * 25 + 4) + (4 * 14 * 14 * 8 + 8) + (8 * 10 + 10));
  model->init_params(1);
  std::vector<float> x(2 * 784, 0.5f);
  const float* y = model->forward(x.data(), 2, StepInfo{false, 0, 0});
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(std::isfinite(y[i]));
}

// Every bad value is a ConfigError that names its key (and where it came from).
void expect_config_error(const std::string& toml, const std::string& key, const Shape& input) {
  SCOPED_TRACE(toml);
  Config cfg = Config::from_string(toml, "bad.toml");
  try {
    build_model(plan::read_model_spec(cfg), cpu_backend(), input, 10);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'" + key + "'"), std::string::npos) << w;
    EXPECT_NE(w.find("bad.toml:"), std::string::npos) << w;
  }
}

TEST(ModelZoo, BadConfigNamesTheKey) {
  expect_config_error("model = \"resnet\"\n", "model", kImage);
  expect_config_error("model = 3\n", "model", kImage);
  expect_config_error("[mlp]\nhidden = [128, 0]\n", "mlp.hidden", kImage);
  expect_config_error("[mlp]\nhidden = [-5]\n", "mlp.hidden", kImage);
  expect_config_error("[mlp]\nhidden = [\"wide\"]\n", "mlp.hidden", kImage);
  expect_config_error("[mlp]\ndropout = 1.5\n", "mlp.dropout", kImage);
  expect_config_error("[mlp]\ndropout = -0.1\n", "mlp.dropout", kImage);
  expect_config_error("[mlp]\ndropout = \"half\"\n", "mlp.dropout", kImage);
  expect_config_error("model = \"cnn\"\n[cnn]\nchannels = [8, 0]\n", "cnn.channels", kImage);
  expect_config_error("model = \"cnn\"\n[cnn]\nhidden = 0\n", "cnn.hidden", kImage);
  expect_config_error("model = \"cnn\"\n[cnn]\ndropout = 1.0\n", "cnn.dropout", kImage);
  // 28 -> 14 -> 7 -> 3 -> 1 -> 0: five pooling stages leave nothing.
  expect_config_error("model = \"cnn\"\n[cnn]\nchannels = [2, 2, 2, 2, 2]\n", "cnn.channels",
                      kImage);
}

TEST(ModelZoo, CnnNeedsAnImage) {
  Config cfg = Config::from_string("model = \"cnn\"\n");
  EXPECT_THROW(build_model(plan::read_model_spec(cfg), cpu_backend(), {784}, 10), ConfigError);
}

TEST(ModelZoo, KeysAreDocumented) {
  std::vector<std::string> keys;
  for (const auto& k : model_config_keys()) keys.push_back(k.key);
  for (const char* k :
       {"model", "mlp.hidden", "mlp.dropout", "cnn.channels", "cnn.hidden", "cnn.dropout"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
}

}  // namespace
}  // namespace loom::nn
