#include "loom/nn/graph/model_description.h"

#include <gtest/gtest.h>

#include "loom/nn/graph/model_zoo.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::nn {
namespace {

const Shape kMnistImage = {1, 28, 28};

// The description agrees with the model build_model makes from the same config.
void expect_matches_model(const Config& cfg) {
  const auto d = describe_layers(plan::read_model_spec(cfg), kMnistImage, 10);
  const auto model = build_model(plan::read_model_spec(cfg), cpu_backend(), kMnistImage, 10);
  ASSERT_EQ(d.size(), model->layers().size());
  int64_t params = 0, flops = 0, width = numel(kMnistImage);
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(d[i].kind, model->layers()[i]->kind()) << i;
    EXPECT_EQ(d[i].in, width) << i;
    EXPECT_EQ(d[i].params, model->layers()[i]->num_params()) << i;
    width = d[i].out;
    params += d[i].params;
    flops += d[i].flops;
  }
  EXPECT_EQ(width, 10);
  EXPECT_EQ(params, model->num_params());
  EXPECT_EQ(flops, model->flops_per_sample());
}

TEST(ModelDescription, DefaultMlp) {
  const auto d = describe_layers(plan::read_model_spec(Config{}), kMnistImage, 10);
  ASSERT_EQ(d.size(), 8u);
  EXPECT_EQ(d[1].kind, "Linear");
  EXPECT_EQ(d[1].in, 784);
  EXPECT_EQ(d[1].out, 1024);
  EXPECT_EQ(d[1].params, 784 * 1024 + 1024);
  EXPECT_EQ(d[1].flops, 2 * 784 * 1024);
  expect_matches_model(Config{});
}

TEST(ModelDescription, CnnAndMlpVariants) {
  expect_matches_model(Config::from_string("model = \"cnn\"\n"));
  expect_matches_model(Config::from_string("model = \"cnn\"\n[cnn]\nchannels = [4, 8, 16]\n"));
  expect_matches_model(Config::from_string("[mlp]\nhidden = [64, 32, 16]\ndropout = 0.0\n"));
}

}  // namespace
}  // namespace loom::nn
