#include "loom/perf/workload.h"

#include <gtest/gtest.h>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/plan/workload_reader.h"

namespace loom::perf {
namespace {

TEST(Workload, MlpFromConfigMatchesHandCount) {
  Workload w =
      plan::read_workload(Config::from_string("model = \"mlp\"\nmlp.hidden = [1024, 1024]\n"));
  // 784*1024 + 1024 + 1024*1024 + 1024 + 1024*10 + 10 (the peers' 1,863,690 floats)
  EXPECT_DOUBLE_EQ(w.params(), 1863690);
  EXPECT_DOUBLE_EQ(w.fwd_flops(), 2.0 * (784 * 1024 + 1024 * 1024 + 1024 * 10));
  EXPECT_DOUBLE_EQ(w.bwd_flops(), 2 * w.fwd_flops());
  EXPECT_EQ(w.layers.size(), 3u);
}

TEST(Workload, CnnFromConfigMatchesHandCount) {
  Workload w = plan::read_workload(Config::from_string("model = \"cnn\"\n"));
  EXPECT_DOUBLE_EQ(w.params(),
                   (25 * 32 + 32) + (25 * 32 * 64 + 64) + (3136 * 1024 + 1024) + (1024 * 10 + 10));
  EXPECT_DOUBLE_EQ(w.fwd_flops(),
                   2.0 * (25 * 32 * 784 + 25 * 32 * 64 * 196 + 3136 * 1024 + 1024 * 10));
}

// A graph's Linear and Conv2d layers are the GEMMs; BatchNorm keeps its parameters but no
// GEMM FLOPs; every other layer is elementwise traffic; every output is an activation.
TEST(Workload, GraphFromLayers) {
  const std::vector<GraphLayer> layers = {
      {"stem", "Conv2d", 784, 16 * 784, 144, 2.0 * 144 * 784},
      {"bn", "BatchNorm2d", 16 * 784, 16 * 784, 32, 4.0 * 16 * 784},
      {"relu", "ReLU", 16 * 784, 16 * 784, 0, 0},
      {"pool", "GlobalAvgPool2d", 16 * 784, 16, 0, 0},
      {"fc", "Linear", 16, 10, 170, 320},
  };
  const Workload w = workload_from_graph("g.toml", layers, 785, 64);
  ASSERT_EQ(w.layers.size(), 3u);  // stem, bn (parameters only), fc
  EXPECT_DOUBLE_EQ(w.params(), 144 + 32 + 170);
  EXPECT_DOUBLE_EQ(w.fwd_flops(), 2.0 * 144 * 784 + 320);
  EXPECT_DOUBLE_EQ(w.activation_bytes, 4.0 * (3 * 16 * 784 + 16 + 10));
  EXPECT_DOUBLE_EQ(w.elementwise_bytes, 12.0 * ((2 * 16 * 784) * 2 + 16 * 784 + 16));
  EXPECT_DOUBLE_EQ(w.conv_io_values, 784 + 16 * 784);  // the stem's input and output
  EXPECT_EQ(w.default_batch, 64);
  EXPECT_FALSE(w.first_layer_input_grad);
}

// The traffic listed by tensor size (what L2 may hold) is the traffic in total, for every
// workload that lists it.
TEST(Workload, TrafficByTensorAddsUpToTheTraffic) {
  const auto listed = [](const Workload& w) {
    double sum = 0;
    for (const TensorTraffic& t : w.elementwise_by_tensor) {
      EXPECT_GT(t.values, 0) << w.name;
      EXPECT_GT(t.bytes, 0) << w.name;
      sum += t.bytes;
    }
    return sum;
  };
  for (const std::string& name : reference_workload_names()) {
    const Workload w = reference_workload(name);
    ASSERT_FALSE(w.elementwise_by_tensor.empty()) << name;
    // The CNNs' tables are rounded to four digits.
    EXPECT_NEAR(listed(w), w.elementwise_bytes, 2e-3 * w.elementwise_bytes) << name;
  }
  DecoderShape s{.name = "d",
                 .layers = 4,
                 .heads = 8,
                 .d_model = 512,
                 .seq = 1024,
                 .vocab = 32000,
                 .params = 60e6};
  for (const bool fused : {false, true})
    for (const bool recompute : {false, true}) {
      s.fused = fused;
      s.recompute = recompute;
      const Workload w = decoder_workload(s);
      EXPECT_NEAR(listed(w), w.elementwise_bytes, 1e-9 * w.elementwise_bytes) << fused << recompute;
    }
  const Workload mlp =
      plan::read_workload(Config::from_string("model = \"mlp\"\nmlp.hidden = [1024, 512]\n"));
  EXPECT_DOUBLE_EQ(listed(mlp), mlp.elementwise_bytes);
  const Workload graph = workload_from_graph(
      "g", {{"bn", "BatchNorm2d", 4096, 4096, 32, 0}, {"pool", "GlobalAvgPool2d", 4096, 16, 0, 0}},
      785, 64);
  EXPECT_DOUBLE_EQ(listed(graph), graph.elementwise_bytes);
  EXPECT_DOUBLE_EQ(graph.elementwise_by_tensor.back().values, 4096);  // the pool's input
}

TEST(Workload, BadConfigIsAnError) {
  EXPECT_THROW(plan::read_workload(Config::from_string("model = \"rnn\"\n")), ConfigError);
  EXPECT_THROW(plan::read_workload(Config::from_string("model = \"mlp\"\nmlp.hidden = [0]\n")),
               ConfigError);
  EXPECT_THROW(reference_workload("resnet5"), InputError);
}

TEST(Workload, ReferenceWorkloadsMatchPublishedTotals) {
  struct Want {
    const char* name;
    double params, gmac;
  };
  // torchvision model docs (params, GMACs); BERT-Large 340M; GPT-2 XL 1558M.
  // ResNet-50 v1: He et al. 2016, Table 1 (3.8e9 multiply-adds; 3.86 from its layer shapes);
  // tf_cnn_benchmarks' AlexNet from its layer shapes.
  for (Want w : {Want{"resnet50", 25.557e6, 4.09}, Want{"resnet50-v1", 25.557e6, 3.86},
                 Want{"resnet101", 44.549e6, 7.80}, Want{"vgg16", 138.358e6, 15.47},
                 Want{"alexnet", 61.1e6, 0.71}, Want{"alexnet-tf", 61.84e6, 0.84},
                 Want{"inception3", 23.8e6, 5.71}}) {
    Workload x = reference_workload(w.name);
    EXPECT_NEAR(x.params() / w.params, 1.0, 0.03) << w.name;
    EXPECT_NEAR(x.fwd_flops() / 2e9 / w.gmac, 1.0, 0.03) << w.name;
  }
  EXPECT_NEAR(reference_workload("bert-large").params(), 340e6, 1e3);
  // Kaplan et al.: ~2 N per token for N = 1.5B at 1024 tokens: 3.1-3.4 TFLOP per sequence.
  double gpt = reference_workload("gpt2-xl").fwd_flops();
  EXPECT_GT(gpt, 3.0e12);
  EXPECT_LT(gpt, 3.5e12);
}

}  // namespace
}  // namespace loom::perf
