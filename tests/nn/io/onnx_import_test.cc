#include "loom/nn/io/onnx_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "data/temp_dir.h"
#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/layer_factory.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

#if LOOM_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

// The fixtures come from tests/nn/make_onnx_fixtures.py (PyTorch 1.13, opset 14, exported with
// training=TrainingMode.TRAINING so BatchNormalization and Dropout stay in the graph).
namespace loom::nn {
namespace {

std::string fixture(const std::string& name) {
  return std::string(LOOM_SOURCE_DIR) + "/tests/data/onnx/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// NAME.ref: lines `key count v1 v2 ...` (input shape, x, eval and train outputs).
std::map<std::string, std::vector<double>> read_ref(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  std::map<std::string, std::vector<double>> ref;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    size_t n = 0;
    in >> key >> n;
    std::vector<double>& v = ref[key];
    v.resize(n);
    for (double& x : v) in >> x;
    EXPECT_TRUE(in) << path << ": line " << key;
  }
  return ref;
}

// What the layer factory lacks for `g` (a layer type or one of its parameters), or "": some
// layers are still being added to it, and a model that needs them cannot be built yet.
std::string factory_lacks(const GraphSpec& g) {
  for (const LayerSpec& l : g.layers) {
    const LayerType* type = nullptr;
    for (const auto& t : layer_types())
      if (t.type == l.type) type = &t;
    if (!type) return "layer type '" + l.type + "'";
    std::vector<std::string> takes;
    std::istringstream in(type->takes);
    std::string item;
    while (std::getline(in, item, ',')) {
      std::istringstream words(item);
      std::string word;
      words >> word;
      takes.push_back(word);
    }
    for (const auto& [key, value] : l.params)
      if (std::find(takes.begin(), takes.end(), key) == takes.end())
        return "parameter '" + key + "' of layer type '" + l.type + "'";
  }
  return "";
}

const LayerSpec& layer(const GraphSpec& g, const std::string& name) {
  for (const auto& l : g.layers)
    if (l.name == name) return l;
  ADD_FAILURE() << "no layer " << name;
  return g.layers.front();
}

#define SKIP_WITHOUT_ONNX_IMPORT() \
  if (!onnx_import_built()) GTEST_SKIP() << "this loom was built without libonnx-dev"

// Loads fixture NAME, runs PyTorch's input through it and compares with PyTorch's outputs.
void check_against_pytorch(const std::string& name) {
  auto ref = read_ref(fixture(name + ".ref"));
  const Shape shape(ref.at("input").begin(), ref.at("input").end());
  GraphSpec g = graph_from_onnx(fixture(name + ".onnx"), shape);
  const std::string lacks = factory_lacks(g);
  if (!lacks.empty())
    GTEST_SKIP() << name << ".onnx needs " << lacks
                 << ", which the layer factory does not have yet";
  Model model(cpu_backend(), shape, 10, build_nodes(g, shape));
  model.init_params(12345);  // must be ignored: every layer has the file's weights
  const std::vector<double>& x64 = ref.at("x");
  const std::vector<float> x(x64.begin(), x64.end());
  const int64_t batch = int64_t(x.size()) / numel(shape);
  for (const char* mode : {"eval", "train"}) {
    if (!ref.count(mode)) continue;
    const std::vector<double>& want = ref.at(mode);
    const float* y = model.forward(x.data(), batch, StepInfo{std::string(mode) == "train", 7, 0});
    ASSERT_EQ(int64_t(want.size()), batch * 10);
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(want[i]));
      max_diff = std::max(max_diff, std::fabs(double(y[i]) - want[i]));
    }
    EXPECT_LE(max_diff, 1e-5 * max_ref) << name << " in " << mode << " mode";
  }
}

TEST(OnnxImport, MlpMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("mlp");
}

// torch.onnx.export's defaults: no Dropout, and the export's batch size of 4 in the Reshape.
TEST(OnnxImport, EvalModeExportMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("mlp_eval");
  GraphSpec g = graph_from_onnx(fixture("mlp_eval.onnx"), {1, 8, 8});
  std::vector<std::string> types;
  for (const auto& l : g.layers) types.push_back(l.type);
  EXPECT_EQ(types,
            (std::vector<std::string>{"flatten", "linear", "relu", "linear", "relu", "linear"}));
}

TEST(OnnxImport, ConvNetMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("convnet");
}

TEST(OnnxImport, CnnWithBatchNormMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("cnn");
}

TEST(OnnxImport, ResidualBlocksMatchPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("resnet");
}

TEST(OnnxImport, ActivationsConcatAndPoolingMatchPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("ops");
}

// MobileNets' activations as torch.onnx writes them: ReLU6 as Clip with constant bounds,
// Hardswish, Hardsigmoid with alpha 1/6; each reached on every piece.
TEST(OnnxImport, MobileActivationsMatchPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("mobile");
  GraphSpec g = graph_from_onnx(fixture("mobile.onnx"), {1, 8, 8});
  std::vector<std::string> types;
  for (const auto& l : g.layers) types.push_back(l.type);
  for (const char* t : {"relu6", "hardswish", "hardsigmoid"})
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
}

// ShuffleNet's layout ops and squeeze-and-excitation's gates, in evaluation and training.
TEST(OnnxImport, ShuffleSplitAndGatesMatchPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("shuffle");
  GraphSpec g = graph_from_onnx(fixture("shuffle.onnx"), {1, 8, 8});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["transpose"], 1);
  EXPECT_EQ(count["reshape"], 2);  // [2, 4, 8, 8] and back to [8, 8, 8]
  EXPECT_EQ(count["slice"], 4);    // chunk's two halves, split's [3, 5]
  EXPECT_EQ(count["mul"], 3);      // two gates, one product of one shape
  EXPECT_EQ(count["globalavgpool2d"], 3);
}

// nanoGPT's attention written op by op, with nn.LayerNorm decomposed (opset 14) and as
// LayerNormalization (opset 17): the same layers either way.
TEST(OnnxImport, HandWrittenGptMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  for (const char* name : {"gpt", "gpt17"}) {
    check_against_pytorch(name);
    GraphSpec g = graph_from_onnx(fixture(std::string(name) + ".onnx"), {8, 4});
    std::map<std::string, int> count;
    for (const auto& l : g.layers) ++count[l.type];
    EXPECT_EQ(count["layernorm"], 5) << name;
    EXPECT_EQ(count["position_embedding"], 1) << name;
    EXPECT_EQ(count["matmul"], 4) << name;  // q k^T and att v, in two blocks
    EXPECT_EQ(count["scale"], 2) << name;
    EXPECT_EQ(count["softmax"], 2) << name;
    EXPECT_EQ(count["transpose"], 8) << name;
    EXPECT_EQ(count["linear"], 10) << name;  // every nn.Linear, its bias folded in
    for (const auto& l : g.layers)
      if (l.type == "softmax") {
        EXPECT_TRUE(std::get<bool>(l.params.at("causal").value)) << name;
      }
  }
}

// nn.TransformerEncoder: nn.MultiheadAttention moves the batch axis and merges it with the
// heads; loom keeps each value stored batch first with a view of its ONNX axes, and transposes
// only where a product or a linear reads along other axes.
TEST(OnnxImport, TransformerEncoderMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("encoder");
  GraphSpec g = graph_from_onnx(fixture("encoder.onnx"), {8, 4});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["matmul"], 4);  // q k^T and att v, in two blocks
  EXPECT_EQ(count["softmax"], 2);
  EXPECT_EQ(count["layernorm"], 4);
  EXPECT_EQ(count["linear"], 10);  // input, in and out projections, two per MLP, head
  EXPECT_EQ(count["slice"], 7);    // q, k and v twice, the first position
  EXPECT_EQ(count["gelu"], 1);
  for (const auto& l : g.layers) {
    if (l.type == "softmax") {
      EXPECT_FALSE(l.params.count("causal"));
    }
  }
}

// A GPT written with nn.MultiheadAttention and a causal attn_mask: the additive -inf mask
// PyTorch makes of it is the causal softmax.
TEST(OnnxImport, MultiheadAttentionGptMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("gpt_mha");
  GraphSpec g = graph_from_onnx(fixture("gpt_mha.onnx"), {8, 4});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["softmax"], 2);
  EXPECT_EQ(count["position_embedding"], 1);
  for (const auto& l : g.layers)
    if (l.type == "softmax") {
      EXPECT_TRUE(std::get<bool>(l.params.at("causal").value));
    }
}

// nn.MultiheadAttention with its averaged weights asked for and dropped, and the mean over the
// positions: ReduceMean over axis 1 is a transpose, a reshape and a global average pool.
TEST(OnnxImport, MeanOverPositionsMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("mha_pool");
  GraphSpec g = graph_from_onnx(fixture("mha_pool.onnx"), {8, 4});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["globalavgpool2d"], 1);
  EXPECT_EQ(count["matmul"], 2);
}

// Einsum that is a batched product, on [batch, T, heads, d] with the result in another order:
// transposes and reshapes around a matmul.
TEST(OnnxImport, EinsumAttentionMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("einsum");
  GraphSpec g = graph_from_onnx(fixture("einsum.onnx"), {8, 4});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["matmul"], 2);
  EXPECT_EQ(count["softmax"], 1);
}

// torchvision's MaxViT: Einsum products, and the relative position bias gathered from a learned
// table is a relative_position_bias layer holding that table; the last stage's single window
// leaves axes of size 1 around the products.
TEST(OnnxImport, MaxVitMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("maxvit");
  GraphSpec g = graph_from_onnx(fixture("maxvit.onnx"), {3, 16, 16});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["relative_position_bias"], 4);  // block and grid attention, two stages
  EXPECT_EQ(count["matmul"], 8);
  for (const auto& l : g.layers)
    if (l.type == "relative_position_bias") {
      EXPECT_EQ(std::get<int64_t>(l.params.at("window").value), 2);
      const int64_t heads = std::get<int64_t>(l.params.at("heads").value);
      EXPECT_EQ(l.init_params.size(), size_t(9 * heads));
    }
}

// torchvision's Swin: the shifted-window mask, computed in the file from the map's size by
// ConstantOfShape, Range, ScatterND, Slice and comparisons, is one fixed_bias layer holding
// -100 and 0 (the second stage's map is a single window: no shift, no mask); the patch
// merging's every other row and column are slices of reshaped maps.
TEST(OnnxImport, SwinMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("swin");
  GraphSpec g = graph_from_onnx(fixture("swin.onnx"), {3, 16, 16});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["relative_position_bias"], 4);
  ASSERT_EQ(count["fixed_bias"], 1);
  for (const auto& l : g.layers)
    if (l.type == "fixed_bias") {
      ASSERT_EQ(l.init_state.size(), size_t(4 * 2 * 16 * 16));  // windows, heads, 16 x 16
      int64_t masked = 0;
      for (float v : l.init_state) {
        EXPECT_TRUE(v == 0.0f || v == -100.0f) << v;
        masked += v != 0.0f;
      }
      EXPECT_GT(masked, 0);
      EXPECT_LT(masked, int64_t(l.init_state.size()) / 2);
    }
}

// Swin on a map its windows do not tile: the padding to whole windows is a pad layer, the crop
// back slices of two axes, the mask that of the padded map, and the patch merging pads the odd
// map first.
TEST(OnnxImport, SwinOnAnUntiledMapMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("swin_pad");
  GraphSpec g = graph_from_onnx(fixture("swin_pad.onnx"), {3, 18, 18});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_GE(count["pad"], 5);  // four blocks' windows and the patch merging
  EXPECT_EQ(count["fixed_bias"], 2);
}

// torchvision's ViT: its class token (a parameter expanded to the batch, then a Concat) is a
// class_token layer holding the parameter's values.
TEST(OnnxImport, VisionTransformerMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("vit");
  GraphSpec g = graph_from_onnx(fixture("vit.onnx"), {3, 16, 16});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["class_token"], 1);
  EXPECT_EQ(count["position_embedding"], 1);
  EXPECT_EQ(count["softmax"], 2);
  for (const auto& l : g.layers)
    if (l.type == "class_token") {
      EXPECT_EQ(l.init_params.size(), 16u);
      EXPECT_FALSE(l.params.count("count"));
    }
}

// ConvNeXt's block: Linear over the channels of [batch, H, W, C] is a linear layer between two
// reshapes, the layer scale a depthwise 1x1 conv holding the gains.
TEST(OnnxImport, ConvNextBlockMatchesPytorch) {
  SKIP_WITHOUT_ONNX_IMPORT();
  check_against_pytorch("convnext");
  GraphSpec g = graph_from_onnx(fixture("convnext.onnx"), {1, 8, 8});
  std::map<std::string, int> count;
  for (const auto& l : g.layers) ++count[l.type];
  EXPECT_EQ(count["linear"], 3);
  EXPECT_EQ(count["reshape"], 4);  // around each linear on four axes
  EXPECT_EQ(count["transpose"], 2);
  EXPECT_EQ(count["layernorm"], 1);
  EXPECT_EQ(count["conv2d"], 3);  // stem, depthwise 7x7, the layer scale
  int scales = 0;
  for (const auto& l : g.layers)
    if (l.type == "conv2d" && l.params.count("groups") &&
        std::get<int64_t>(l.params.at("kernel").value) == 1) {
      ++scales;
      EXPECT_EQ(l.init_params.size(), 8u);
    }
  EXPECT_EQ(scales, 1);
}

TEST(OnnxImport, MlpGraphLayersNamesAndWeights) {
  SKIP_WITHOUT_ONNX_IMPORT();
  GraphSpec g = graph_from_onnx(fixture("mlp.onnx"), {1, 8, 8});
  std::vector<std::string> types, names;
  for (const auto& l : g.layers) {
    types.push_back(l.type);
    names.push_back(l.name);
  }
  // reshape(x.size(0), -1) -> flatten; Linear -> Gemm; matmul + add -> one linear; addmm ->
  // Gemm with transB = 0.
  EXPECT_EQ(types, (std::vector<std::string>{"flatten", "linear", "relu", "dropout", "linear",
                                             "relu", "linear"}));
  EXPECT_EQ(names, (std::vector<std::string>{"Reshape", "fc1_Gemm", "Relu", "drop_Dropout",
                                             "MatMul", "Relu_1", "Gemm"}));
  EXPECT_EQ(g.layers[0].inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(g.layers[1].inputs, std::vector<std::string>{"Reshape"});
  EXPECT_EQ(g.layers[1].init_params.size(), size_t(64 * 32 + 32));
  EXPECT_EQ(g.layers[4].init_params.size(), size_t(32 * 16 + 16));  // the Add became its bias
  EXPECT_EQ(g.layers[4].params.count("bias"), 0u);
  EXPECT_DOUBLE_EQ(std::get<double>(g.layers[3].params.at("p").value), 0.25);
  EXPECT_TRUE(g.layers[0].where.find("mlp.onnx") != std::string::npos) << g.layers[0].where;
}

TEST(OnnxImport, ModelKeyLoadsAnOnnxFile) {
  SKIP_WITHOUT_ONNX_IMPORT();
  Config cfg;
  cfg.set("model", fixture("mlp.onnx"));
  auto model = build_model(plan::read_model_spec(cfg), cpu_backend(), {1, 8, 8}, 10);
  EXPECT_EQ(model->num_params(), (64 * 32 + 32) + (32 * 16 + 16) + (16 * 10 + 10));
  model->init_params(1);
  // fc1's first weight, as the file has it.
  GraphSpec g = graph_from_onnx(fixture("mlp.onnx"), {1, 8, 8});
  EXPECT_EQ(model->params()[0], g.layers[1].init_params[0]);
  EXPECT_EQ(model->params()[model->num_params() - 1], g.layers.back().init_params.back());
}

TEST(OnnxImport, ModelParallelChainsRefuseImportedWeights) {
  SKIP_WITHOUT_ONNX_IMPORT();
  Config cfg;
  cfg.set("model", fixture("mlp.onnx"));
  try {
    build_layers(plan::read_model_spec(cfg), {1, 8, 8}, 10);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1_Gemm"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, BatchNormImportsStatisticsAndPytorchMomentum) {
  SKIP_WITHOUT_ONNX_IMPORT();
  GraphSpec g = graph_from_onnx(fixture("cnn.onnx"), {1, 8, 8});
  const LayerSpec& conv = g.layers[0];
  EXPECT_EQ(conv.type, "conv2d");
  EXPECT_FALSE(std::get<bool>(conv.params.at("bias").value));
  EXPECT_EQ(conv.init_params.size(), size_t(4 * 9));
  const LayerSpec& bn = g.layers[1];
  EXPECT_EQ(bn.type, "batchnorm2d");
  EXPECT_EQ(bn.init_params.size(), size_t(8));
  EXPECT_EQ(bn.init_state.size(), size_t(8));
  EXPECT_DOUBLE_EQ(std::get<double>(bn.params.at("momentum").value), 0.1);  // ONNX's 0.9
  EXPECT_DOUBLE_EQ(std::get<double>(bn.params.at("eps").value), 1e-5);
  // avg_pool2d's Pad + AveragePool is one avgpool2d.
  EXPECT_EQ(layer(g, "AveragePool").type, "avgpool2d");
  EXPECT_EQ(layer(g, "AveragePool").params.count("padding"), 0u);
}

TEST(OnnxImport, ResidualAddsAndFusedActivations) {
  SKIP_WITHOUT_ONNX_IMPORT();
  GraphSpec r = graph_from_onnx(fixture("resnet.onnx"), {3, 8, 8});
  EXPECT_EQ(layer(r, "block1_Add").inputs,
            (std::vector<std::string>{"block1_bn2_BatchNormalization", "stem_stem_2_Relu"}));
  EXPECT_EQ(layer(r, "block2_Add").inputs,
            (std::vector<std::string>{"block2_bn2_BatchNormalization",
                                      "block2_short_short_1_BatchNormalization"}));
  // The Flatten of the pool's [C, 1, 1] is the pool's own [C]: no layer of its own.
  EXPECT_EQ(layer(r, "pool_GlobalAveragePool").type, "globalavgpool2d");
  EXPECT_EQ(layer(r, "pool_GlobalAveragePool").params.count("keep_dims"), 0u);
  EXPECT_EQ(layer(r, "fc_Gemm").inputs, std::vector<std::string>{"pool_GlobalAveragePool"});

  // x * sigmoid(x) is one silu layer (the Sigmoid alone is not kept), the erf chain one gelu.
  GraphSpec o = graph_from_onnx(fixture("ops.onnx"), {2, 8, 8});
  std::vector<std::string> types;
  for (const auto& l : o.layers) types.push_back(l.type);
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "leakyrelu", "conv2d", "silu", "conv2d",
                                             "gelu", "tanh", "concat", "sigmoid", "maxpool2d",
                                             "avgpool2d", "flatten", "linear"}));
  EXPECT_EQ(layer(o, "SiLU").inputs, std::vector<std::string>{"conv2_Conv"});
  EXPECT_EQ(layer(o, "GELU_2").inputs, std::vector<std::string>{"conv3_Conv"});
  EXPECT_EQ(std::get<int64_t>(layer(o, "conv2_Conv").params.at("groups").value), 2);
  EXPECT_DOUBLE_EQ(std::get<double>(layer(o, "LeakyRelu").params.at("slope").value), 0.1);
  EXPECT_FALSE(std::get<bool>(layer(o, "AveragePool").params.at("count_include_pad").value));
}

TEST(OnnxImport, UnsupportedOpNamesNodeAndOpType) {
  SKIP_WITHOUT_ONNX_IMPORT();
  try {
    graph_from_onnx(fixture("softplus.onnx"), {1, 8, 8});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("softplus.onnx"), std::string::npos) << what;
    EXPECT_NE(what.find("node '/Softplus' (Softplus)"), std::string::npos) << what;
    EXPECT_NE(what.find("Conv"), std::string::npos) << what;  // the ops loom reads
  }
}

TEST(OnnxImport, InputShapeMustBeTheData) {
  SKIP_WITHOUT_ONNX_IMPORT();
  try {
    graph_from_onnx(fixture("mlp.onnx"), {1, 28, 28});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[batch, 1, 8, 8]"), std::string::npos) << what;
    EXPECT_NE(what.find("[1, 28, 28]"), std::string::npos) << what;
  }
}

// Every error about a bad file is a loom error of exit code 2 that names the file.
void expect_clean_error(const std::string& bytes, const std::string& name) {
  try {
    graph_from_onnx_bytes(bytes.data(), bytes.size(), name, {1, 8, 8});
    FAIL() << name << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, MissingEmptyTruncatedAndGarbageFiles) {
  SKIP_WITHOUT_ONNX_IMPORT();
  EXPECT_THROW(graph_from_onnx(fixture("no_such.onnx"), {1, 8, 8}), InputError);
  expect_clean_error("", "empty.onnx");
  const std::string bytes = read_bytes(fixture("mlp.onnx"));
  for (size_t n = 1; n < bytes.size(); n += 61) expect_clean_error(bytes.substr(0, n), "cut.onnx");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string garbage(size_t(16 + trial * 37), '\0');
    for (char& c : garbage) c = char(rng());
    expect_clean_error(garbage, "garbage.onnx");
  }
  // Flipped bytes inside a valid file.
  for (int trial = 0; trial < 200; ++trial) {
    std::string flipped = bytes;
    flipped[rng() % flipped.size()] ^= char(1 + rng() % 255);
    try {
      graph_from_onnx_bytes(flipped.data(), flipped.size(), "flip.onnx", {1, 8, 8});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    }
  }
}

TEST(OnnxImport, WrongSizedInitialWeightsAreAConfigError) {
  SKIP_WITHOUT_ONNX_IMPORT();
  GraphSpec g = graph_from_onnx(fixture("mlp.onnx"), {1, 8, 8});
  g.layers[1].init_params.pop_back();
  try {
    Model model(cpu_backend(), {1, 8, 8}, 10, build_nodes(g, {1, 8, 8}));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("fc1_Gemm"), std::string::npos) << what;
    EXPECT_NE(what.find("2079"), std::string::npos) << what;
    EXPECT_NE(what.find("2080"), std::string::npos) << what;
  }
}

// A model whose output is not the data's class count: the error names the .onnx file the
// config gave (not only the layer), since the file is what the user can change.
TEST(OnnxImport, AClassCountThatDoesNotFitNamesTheFile) {
  SKIP_WITHOUT_ONNX_IMPORT();
  Config cfg;
  cfg.set("model", fixture("mlp.onnx"));
  try {
    build_model(plan::read_model_spec(cfg), cpu_backend(), {1, 8, 8}, 7);
    ADD_FAILURE() << "a 10-class model built for 7 classes";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fixture("mlp.onnx") + ": model output [10]"),
              std::string::npos)
        << e.what();
  }
}

#if LOOM_HAVE_ONNX

onnx::ModelProto mlp_proto() {
  onnx::ModelProto m;
  const std::string bytes = read_bytes(fixture("mlp.onnx"));
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

std::string import_error(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  try {
    graph_from_onnx_bytes(bytes.data(), bytes.size(), "edited.onnx", {1, 8, 8});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    EXPECT_NE(std::string(e.what()).find("edited.onnx"), std::string::npos) << e.what();
    return e.what();
  }
  return "no error";
}

onnx::TensorProto* initializer(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

// Models over protobuf's 2 GB keep their weights in files beside the .onnx file (ONNX external
// data): the MLP with every initializer moved into one such file imports to the same weights.
// A location that leaves the model's folder, a missing file or a range past its end is an input
// error naming the initializer.
TEST(OnnxImport, ExternalDataReadsAsTheWeightsInside) {
  SKIP_WITHOUT_ONNX_IMPORT();
  const GraphSpec inside = graph_from_onnx(fixture("mlp.onnx"), {1, 8, 8});
  data::testing::TempDir dir;
  auto external = [&](const std::string& location, int64_t extra_length) {
    onnx::ModelProto m = mlp_proto();
    std::ofstream bin(dir.file("weights.bin"), std::ios::binary | std::ios::trunc);
    int64_t at = 0;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (!t.has_raw_data()) continue;
      const std::string bytes = t.raw_data();
      bin.write(bytes.data(), std::streamsize(bytes.size()));
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const char* key, const std::string& value) {
        auto* e = t.add_external_data();
        e->set_key(key);
        e->set_value(value);
      };
      add("location", location);
      add("offset", std::to_string(at));
      add("length", std::to_string(int64_t(bytes.size()) + extra_length));
      at += int64_t(bytes.size());
    }
    bin.close();
    EXPECT_GT(at, 0) << "mlp.onnx has no initializer with raw data to move";
    std::ofstream(dir.file("model.onnx"), std::ios::binary) << m.SerializeAsString();
    return dir.file("model.onnx");
  };
  const GraphSpec outside = graph_from_onnx(external("weights.bin", 0), {1, 8, 8});
  ASSERT_EQ(outside.layers.size(), inside.layers.size());
  for (size_t i = 0; i < inside.layers.size(); ++i)
    EXPECT_EQ(outside.layers[i].init_params, inside.layers[i].init_params) << inside.layers[i].name;

  auto error = [&](const std::string& path) {
    try {
      graph_from_onnx(path, {1, 8, 8});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string what = error(external("../weights.bin", 0));
  EXPECT_NE(what.find("is not a file in the model's folder"), std::string::npos) << what;
  what = error(external("missing.bin", 0));
  EXPECT_NE(what.find("cannot open its external data file"), std::string::npos) << what;
  what = error(external("weights.bin", 1 << 20));
  EXPECT_NE(what.find("initializer '"), std::string::npos) << what;
  EXPECT_NE(what.find("is outside"), std::string::npos) << what;
}

TEST(OnnxImport, MissingInitializerNamesTheNodeAndTheValue) {
  onnx::ModelProto m = mlp_proto();
  auto* inits = m.mutable_graph()->mutable_initializer();
  for (int i = 0; i < inits->size(); ++i)
    if (inits->Get(i).name() == "fc1.weight") inits->DeleteSubrange(i, 1);
  const std::string what = import_error(m);
  EXPECT_NE(what.find("node '/fc1/Gemm' (Gemm)"), std::string::npos) << what;
  EXPECT_NE(what.find("'fc1.weight'"), std::string::npos) << what;
}

TEST(OnnxImport, InitializerDataMustFillItsShape) {
  onnx::ModelProto m = mlp_proto();
  initializer(m, "fc1.weight")->set_dims(1, 65);
  const std::string what = import_error(m);
  EXPECT_NE(what.find("initializer 'fc1.weight'"), std::string::npos) << what;
  EXPECT_NE(what.find("[32, 65]"), std::string::npos) << what;
}

TEST(OnnxImport, WeightShapeMustFitTheInput) {
  onnx::ModelProto m = mlp_proto();
  onnx::TensorProto* w = initializer(m, "fc1.weight");
  w->set_dims(0, 64);  // [64, 32]: the same data, but 32 inputs where the input has 64
  w->set_dims(1, 32);
  const std::string what = import_error(m);
  EXPECT_NE(what.find("node '/fc1/Gemm' (Gemm)"), std::string::npos) << what;
  EXPECT_NE(what.find("do not take 64 features"), std::string::npos) << what;
}

std::string import_error(const onnx::ModelProto& m, const Shape& input) {
  const std::string bytes = m.SerializeAsString();
  try {
    graph_from_onnx_bytes(bytes.data(), bytes.size(), "edited.onnx", input);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput) << e.what();
    return e.what();
  }
  return "no error";
}

// A value whose batch axis a Transpose moved is followed to where it is read: a product whose
// leading axes differ, or an op that needs the batch first again and does not get it, is
// refused naming the node and the axes; so is a mask that is not the causal one (loom's graph
// has only the causal mask).
TEST(OnnxImport, MovedBatchAxesAndOtherMasksAreRefusedByNode) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("gpt.onnx"))));
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.name() == "/blocks/blocks.0/Transpose")
      n.mutable_attribute(0)->set_ints(0, 2), n.mutable_attribute(0)->set_ints(1, 0);
  std::string what = import_error(m, {8, 4});
  EXPECT_NE(what.find("node '/blocks/blocks.0/MatMul' (MatMul)"), std::string::npos) << what;
  EXPECT_NE(what.find("inputs [2, batch, 8, 8] and [batch, 2, 8, 8]"), std::string::npos) << what;

  // nn.MultiheadAttention's output left as [T, batch, E]: the residual Add reads it beside
  // [batch, T, E].
  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("encoder.onnx"))));
  bool found = false;
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.name() == "/enc/layers.0/self_attn/Transpose_6") {
      ASSERT_EQ(n.attribute(0).ints_size(), 3);
      n.mutable_attribute(0)->set_ints(0, 0), n.mutable_attribute(0)->set_ints(1, 1);
      found = true;
    }
  ASSERT_TRUE(found) << "encoder.onnx has no output transpose of its first attention";
  what = import_error(m, {8, 4});
  EXPECT_NE(what.find("(Add)"), std::string::npos) << what;
  EXPECT_NE(what.find("[8, batch, 16]"), std::string::npos) << what;
  EXPECT_NE(what.find("batch axis first"), std::string::npos) << what;

  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("gpt.onnx"))));
  onnx::TensorProto* mask = initializer(m, "blocks.1.mask");
  ASSERT_NE(mask, nullptr);
  // Every position sees every other: no causal mask.
  std::vector<float> ones(64, 1.0f);
  mask->set_raw_data(ones.data(), ones.size() * sizeof(float));
  what = import_error(m, {8, 4});
  EXPECT_NE(what.find("node '/blocks/blocks.1/Where' (Where)"), std::string::npos) << what;
  EXPECT_NE(what.find("causal mask"), std::string::npos) << what;
}

// Swin's patch merging with a step that does not tile the map (every third of 8 rows from 0 takes
// 0, 3 and 6, which no range of whole steps inside the axis holds), or a backward step, is
// refused naming the node.
TEST(OnnxImport, StepsThatDoNotTileTheAxisAreRefusedByNode) {
  for (int64_t step : {int64_t(3), int64_t(-1)}) {
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("swin.onnx"))));
    std::string steps_name;
    for (const auto& n : m.graph().node())
      if (n.name() == "/features/features.2/Slice_1") steps_name = n.input(4);
    ASSERT_FALSE(steps_name.empty()) << "swin.onnx has no patch merging Slice_1";
    bool found = false;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "Constant" && n.output(0) == steps_name) {
        onnx::TensorProto* t = n.mutable_attribute(0)->mutable_t();
        t->clear_raw_data();
        t->clear_int64_data();
        t->add_int64_data(step);
        found = true;
      }
    ASSERT_TRUE(found);
    const std::string what = import_error(m, {3, 16, 16});
    EXPECT_NE(what.find("node '/features/features.2/Slice_1' (Slice)"), std::string::npos) << what;
    EXPECT_NE(what.find(step > 0 ? "whole steps" : "step -1"), std::string::npos) << what;
  }
}

// The constant folds of any rank, on a graph written by hand: y = x + c with
//   c = Slice(Where(Not(Equal(Mod(Range(0, 4, 1), 2), 0)), Expand(-1, [4]),
//                   ScatterND(ConstantOfShape([4]), [[0], [3]], [5, 7])), steps -1)
// Range 0 1 2 3, Mod 2: 0 1 0 1, odd: 0 1 0 1, Where: 5 -1 0 -1, reversed: -1 0 -1 5; then
// Concat([c], [c]) on a new leading axis, Less of it and 0.5 cast to float, subtracted: a
// fixed_bias of [2, 4] holding each test's answer.
TEST(OnnxImport, ConstantFoldsOfAnyRankComputeOnnxsValues) {
  SKIP_WITHOUT_ONNX_IMPORT();
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(14);
  onnx::GraphProto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  g->add_output()->set_name("y");
  auto ints = [&](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
  };
  auto floats = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  };
  auto node = [&](const std::string& op, std::vector<std::string> ins, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name("/" + out);
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  ints("zero", {}, {0});
  ints("four", {}, {4});
  ints("one", {}, {1});
  ints("two", {}, {2});
  ints("shape4", {1}, {4});
  ints("idx", {2, 1}, {0, 3});
  floats("upd", {2}, {5, 7});
  floats("minus_one", {}, {-1});
  floats("half", {}, {0.5f});
  ints("rev_start", {1}, {-1});
  ints("rev_end", {1}, {std::numeric_limits<int64_t>::min() + 1});
  ints("axis0", {1}, {0});
  ints("step_back", {1}, {-1});
  ints("lead", {1}, {0});
  node("Range", {"zero", "four", "one"}, "range");
  node("Mod", {"range", "two"}, "mod");
  node("Equal", {"mod", "zero"}, "even");
  node("Not", {"even"}, "odd");
  node("Expand", {"minus_one", "shape4"}, "fill");
  node("ConstantOfShape", {"shape4"}, "zeros");
  node("ScatterND", {"zeros", "idx", "upd"}, "scattered");
  node("Where", {"odd", "fill", "scattered"}, "picked");
  node("Slice", {"picked", "rev_start", "rev_end", "axis0", "step_back"}, "reversed");
  node("Unsqueeze", {"reversed", "lead"}, "row");
  auto* cat = node("Concat", {"row", "row"}, "rows");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  node("Less", {"rows", "half"}, "low");
  auto* cast = node("Cast", {"low"}, "low_f");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  node("Sub", {"rows", "low_f"}, "c");
  node("Add", {"x", "c"}, "y");
  const std::string bytes = m.SerializeAsString();
  const GraphSpec spec = graph_from_onnx_bytes(bytes.data(), bytes.size(), "folds.onnx", {2, 4});
  const LayerSpec* bias = nullptr;
  for (const auto& l : spec.layers)
    if (l.type == "fixed_bias") bias = &l;
  ASSERT_NE(bias, nullptr);
  // -1 0 -1 5 minus (value < 0.5): -2 -1 -2 5, in both rows.
  EXPECT_EQ(bias->init_state, (std::vector<float>{-2, -1, -2, 5, -2, -1, -2, 5}));
}

// A mean over the batch axis has no layer: refused naming the node.
TEST(OnnxImport, MeanOverTheBatchIsRefusedByNode) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("mha_pool.onnx"))));
  bool found = false;
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "ReduceMean")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "axes") a.set_ints(0, 0), found = true;
  ASSERT_TRUE(found);
  const std::string what = import_error(m, {8, 4});
  EXPECT_NE(what.find("(ReduceMean)"), std::string::npos) << what;
  EXPECT_NE(what.find("not over the batch"), std::string::npos) << what;
}

// An Einsum that is not a batched matrix product (an index summed in one input only, an
// ellipsis) is refused naming the node and the equation.
TEST(OnnxImport, EinsumOtherThanAProductIsRefusedByNode) {
  for (const char* eq : {"bqhd,bkhd->bhq", "...hd,bkhd->bhqk", "bqhd,bkhd->bhqkk"}) {
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("einsum.onnx"))));
    bool found = false;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "Einsum" && !found) {
        n.mutable_attribute(0)->set_s(eq);
        found = true;
      }
    ASSERT_TRUE(found);
    const std::string what = import_error(m, {8, 4});
    EXPECT_NE(what.find("(Einsum)"), std::string::npos) << eq << ": " << what;
    EXPECT_NE(what.find(std::string("equation '") + eq), std::string::npos) << what;
  }
}

// Table entries gathered by an index other than Swin's are refused naming the node: loom
// learns them only as a relative position bias.
TEST(OnnxImport, TableBiasByAnotherIndexIsRefusedByNode) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("maxvit.onnx"))));
  bool found = false;
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name().find("relative_position_index") != std::string::npos && !found) {
      ASSERT_EQ(t.data_type(), onnx::TensorProto::INT64);
      std::string raw = t.raw_data();
      ASSERT_GE(raw.size(), 16u);
      std::swap_ranges(raw.begin(), raw.begin() + 8, raw.begin() + 8);  // entries 0 and 1
      t.set_raw_data(raw);
      found = true;
    }
  ASSERT_TRUE(found);
  const std::string what = import_error(m, {3, 16, 16});
  EXPECT_NE(what.find("(Add)"), std::string::npos) << what;
  EXPECT_NE(what.find("relative position bias"), std::string::npos) << what;
  EXPECT_NE(what.find("its index is another"), std::string::npos) << what;
}

// Clip other than ReLU6's bounds, or a HardSigmoid other than PyTorch's, is refused naming the
// node: loom has no layer that computes them.
TEST(OnnxImport, ClipAndHardSigmoidOtherThanPytorchsAreRefusedByNode) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("mobile.onnx"))));
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Clip") {
      ASSERT_GE(n.input_size(), 3);
      n.set_input(2, n.input(1));  // max = min = 0
    }
  std::string what = import_error(m);
  EXPECT_NE(what.find("(Clip)"), std::string::npos) << what;
  EXPECT_NE(what.find("ReLU6"), std::string::npos) << what;

  ASSERT_TRUE(m.ParseFromString(read_bytes(fixture("mobile.onnx"))));
  bool found = false;
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "HardSigmoid")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "alpha") a.set_f(0.2f), found = true;
  ASSERT_TRUE(found) << "mobile.onnx has no HardSigmoid with an alpha";
  what = import_error(m);
  EXPECT_NE(what.find("(HardSigmoid)"), std::string::npos) << what;
  EXPECT_NE(what.find("alpha 0.2"), std::string::npos) << what;
}

TEST(OnnxImport, UnknownOpsetAndIrVersionAreRefusedByNumber) {
  onnx::ModelProto m = mlp_proto();
  m.mutable_opset_import(0)->set_version(99);
  std::string what = import_error(m);
  EXPECT_NE(what.find("opset 99"), std::string::npos) << what;
  m = mlp_proto();
  m.set_ir_version(42);
  what = import_error(m);
  EXPECT_NE(what.find("IR version 42"), std::string::npos) << what;
}

TEST(OnnxImport, AnOutputLoomDoesNotComputeMustBeUnused) {
  // The dropout mask feeding the graph's output.
  onnx::ModelProto m = mlp_proto();
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Dropout") m.mutable_graph()->mutable_output(0)->set_name(n.output(1));
  const std::string what = import_error(m);
  EXPECT_NE(what.find("(Dropout)"), std::string::npos) << what;
  EXPECT_NE(what.find("output 2"), std::string::npos) << what;
}

// Weights that are NaN or Inf are refused at import, naming the file, the initializer and the
// element, instead of training (and saving) a model that answers NaN.
TEST(OnnxImport, AnInitializerHoldingNanOrInfIsRefused) {
  for (float bad : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    onnx::ModelProto m = mlp_proto();
    onnx::TensorProto* w = initializer(m, "fc1.bias");
    ASSERT_NE(w, nullptr);
    if (w->has_raw_data()) {
      std::string raw = w->raw_data();
      std::memcpy(raw.data() + 4 * 3, &bad, 4);
      w->set_raw_data(raw);
    } else {
      w->set_float_data(3, bad);
    }
    const std::string what = import_error(m);
    EXPECT_NE(what.find("initializer 'fc1.bias' holds"), std::string::npos) << what;
    EXPECT_NE(what.find("at element 3"), std::string::npos) << what;
  }
}

#endif  // LOOM_HAVE_ONNX

}  // namespace
}  // namespace loom::nn
