// The safetensors reader and writer (nn/io/safetensors.h) and the model file on top of it
// (nn/io/model_file.h): bit-exact round trips, every malformation the reader refuses, and the
// naming of a model's layers as tensors.
#include "loom/nn/io/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/io/model_file.h"
#include "loom/nn/io/onnx_import.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace loom::nn {
namespace {

using data::testing::TempDir;

std::vector<uint8_t> file_of(const std::string& header, const std::vector<uint8_t>& data,
                             int64_t claimed_length = -1) {
  const uint64_t n = claimed_length < 0 ? header.size() : uint64_t(claimed_length);
  std::vector<uint8_t> out(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

// The message parse() throws, or "" when it accepts the bytes.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile::parse(bytes, "w.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::vector<uint8_t>& bytes, const std::string& part) {
  const std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("w.safetensors: "), std::string::npos) << msg;
  EXPECT_NE(msg.find(part), std::string::npos) << "expected '" << part << "' in: " << msg;
}

std::string one_tensor(const std::string& dtype, const std::string& shape, uint64_t b, uint64_t e) {
  return fmt::format(R"({{"t": {{"dtype": "{}", "shape": {}, "data_offsets": [{}, {}]}}}})", dtype,
                     shape, b, e);
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST(Safetensors, RoundTripIsBitExactWithShapesAndMetadata) {
  // Values whose bits a decimal or a conversion would change: NaN payloads, -0, denormals.
  std::vector<float> a = {0.0f,
                          -0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          std::bit_cast<float>(uint32_t(0x7fc01234)),
                          std::bit_cast<float>(uint32_t(0xff800001)),
                          std::numeric_limits<float>::infinity(),
                          1.0f / 3.0f};
  std::vector<float> b(24);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::sin(float(i) * 1.7f) * 1e-3f;
  const std::vector<SafetensorsView> views = {
      {"x.weight", {7}, a.data()}, {"x.bias", {2, 3, 4}, b.data()}, {"empty", {0, 5}, nullptr}};
  const std::map<std::string, std::string> meta = {{"k", "v \"quoted\"\n"},
                                                   {"format_version", "1"}};
  const std::vector<uint8_t> bytes = safetensors_bytes(views, meta);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  EXPECT_EQ((8 + n) % 8, 0u) << "data starts on an 8-byte boundary";
  EXPECT_EQ(bytes.size(), 8 + n + (a.size() + b.size()) * 4);

  TempDir t;
  const std::string path = t.file("w.safetensors");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  const SafetensorsFile f = SafetensorsFile::read(path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), 3u);
  const SafetensorsTensor* ta = f.find("x.weight");
  const SafetensorsTensor* tb = f.find("x.bias");
  ASSERT_TRUE(ta && tb && f.find("empty"));
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{7}));
  EXPECT_EQ(tb->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f.find("empty")->shape, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(ta->dtype, "F32");
  const std::vector<float> ra = f.f32(*ta), rb = f.f32(*tb);
  ASSERT_EQ(ra.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bits(ra[i]), bits(a[i])) << i;
  ASSERT_EQ(rb.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(bits(rb[i]), bits(b[i])) << i;
  // Tensors lie in the order written: the first at offset 0.
  EXPECT_EQ(ta->begin, 0u);
  EXPECT_EQ(tb->begin, 28u);
}

TEST(Safetensors, ReadsOtherDtypesAndASpacePaddedHeader) {
  std::string h = R"({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                      "b": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]}})";
  h += "    ";
  const SafetensorsFile f = SafetensorsFile::parse(file_of(h, std::vector<uint8_t>(12, 7)), "w");
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.bytes(*f.find("b")).size(), 8u);
  EXPECT_THROW(f.f32(*f.find("a")), InputError);
}

TEST(Safetensors, RefusesTruncatedFiles) {
  expect_refused({1, 2, 3}, "truncated safetensors file: 3 bytes");
  expect_refused({}, "truncated");
}

TEST(Safetensors, RefusesAHeaderLengthPastTheEndBeforeAllocatingIt) {
  // 2^60 bytes of header claimed in a file of a few bytes: refused by the length check (an
  // allocation of that size would throw std::bad_alloc instead, which the test would see).
  expect_refused(file_of("{}", {}, int64_t(1) << 60),
                 "header length 1152921504606846976 runs past "
                 "the end of the file (10 bytes)");
  expect_refused(file_of("{}", {}, 3), "runs past the end");
  TempDir t;
  const std::vector<uint8_t> bytes = file_of("{}", {}, int64_t(1) << 62);
  std::ofstream(t.file("big.safetensors"), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  try {
    SafetensorsFile::read(t.file("big.safetensors"));
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(t.file("big.safetensors") + ": safetensors header length"),
              std::string::npos)
        << e.what();
  }
}

TEST(Safetensors, RefusesBadJson) {
  expect_refused(file_of("{\"t\": [", {}), "header is not valid JSON");
  expect_refused(file_of("[1, 2]", {}), "header is not a JSON object");
  expect_refused(file_of("{\"t\": 3}", {}), "tensor 't': entry is not an object");
  expect_refused(file_of(R"({"t": {"dtype": "F32", "shape": [1]}})", std::vector<uint8_t>(4)),
                 "tensor 't': no \"data_offsets\"");
  expect_refused(file_of(one_tensor("F32", "[-1]", 0, 4), std::vector<uint8_t>(4)),
                 "not a dimension >= 0");
  expect_refused(file_of(one_tensor("F32", "3", 0, 4), std::vector<uint8_t>(4)),
                 "\"shape\" is not an array");
}

TEST(Safetensors, RefusesUnknownDtypes) {
  expect_refused(file_of(one_tensor("F31", "[1]", 0, 4), std::vector<uint8_t>(4)),
                 "tensor 't': unknown dtype \"F31\"");
}

TEST(Safetensors, RefusesOffsetsOutOfRangeReversedOrNotMatchingTheShape) {
  expect_refused(file_of(one_tensor("F32", "[2]", 0, 8), std::vector<uint8_t>(4)),
                 "tensor 't': data_offsets [0, 8] run past the 4 bytes of data");
  expect_refused(file_of(one_tensor("F32", "[0]", 4, 0), std::vector<uint8_t>(4)),
                 "end before they begin");
  expect_refused(file_of(one_tensor("F32", "[2]", 0, 4), std::vector<uint8_t>(4)),
                 "data_offsets [0, 4] hold 4 bytes; shape [2] of F32 needs 8");
  expect_refused(file_of(one_tensor("F64", "[1]", 0, 4), std::vector<uint8_t>(4)), "needs 8");
  // A shape whose byte count overflows 64 bits matches no offsets.
  expect_refused(
      file_of(one_tensor("F32", "[4294967296, 4294967296]", 0, 4), std::vector<uint8_t>(4)),
      "needs 18446744073709551615");
}

TEST(Safetensors, RefusesOverlapsGapsAndUncoveredData) {
  const std::string two = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  expect_refused(file_of(two, std::vector<uint8_t>(12)), "tensors 'a' and 'b' overlap");
  const std::string gap = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
  expect_refused(file_of(gap, std::vector<uint8_t>(12)),
                 "a gap of 4 bytes in the data before "
                 "tensor 'b'");
  expect_refused(file_of(one_tensor("F32", "[1]", 0, 4), std::vector<uint8_t>(8)),
                 "tensors cover 4 of the 8 bytes of data");
}

TEST(Safetensors, RefusesMetadataThatIsNotAMapOfStrings) {
  expect_refused(file_of(R"({"__metadata__": {"format_version": 1}})", {}),
                 "metadata \"format_version\" is not a string");
  expect_refused(file_of(R"({"__metadata__": [1]})", {}), "\"__metadata__\" is not an object");
}

TEST(Safetensors, AMissingFileIsAnInputErrorNamingIt) {
  try {
    SafetensorsFile::read("/nonexistent/w.safetensors");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/w.safetensors: cannot open"),
              std::string::npos);
  }
}

// ---- the model file ----

constexpr const char* kGraph = R"(
[[layer]]
type = "conv2d"
out = 3
kernel = [3, 2]
[[layer]]
type = "batchnorm2d"
[[layer]]
type = "relu"
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out = 4
)";

std::unique_ptr<Model> graph_model(const GraphSpec& g) {
  const Shape in = {2, 5, 5};
  auto m = std::make_unique<Model>(cpu_backend(), in, 4, build_nodes(g, in));
  m->init_params(7);
  // State unlike its initial values, so a loader that skips it is caught.
  for (int64_t i = 0; i < m->num_state(); ++i) m->state()[i] = 0.25f * float(i + 1);
  return m;
}

TEST(ModelFile, LayersNameTheirTensorsAsPyTorchShapesThem) {
  const GraphSpec g = graph_from_string(kGraph, "g.toml");
  const auto m = graph_model(g);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const ModelTensor& t : model_tensors(*m)) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "conv2d_0.weight", "conv2d_0.bias", "batchnorm2d_0.weight",
                       "batchnorm2d_0.bias", "batchnorm2d_0.running_mean",
                       "batchnorm2d_0.running_var", "linear_0.weight", "linear_0.bias"}));
  // nn.Conv2d(2, 3, (3, 2)).weight is [3, 2, 3, 2]; nn.Linear(3*3*4, 4).weight is [4, 36].
  EXPECT_EQ(shapes, (std::vector<Shape>{{3, 2, 3, 2}, {3}, {3}, {3}, {3}, {3}, {4, 36}, {4}}));
}

TEST(ModelFile, RoundTripRebuildsTheModelWithTheSameBitsAndOutputs) {
  const GraphSpec g = graph_from_string(kGraph, "g.toml");
  const auto m = graph_model(g);
  const std::vector<float> params(m->params(), m->params() + m->num_params());
  const std::vector<float> state(m->state(), m->state() + m->num_state());
  TempDir t;
  const std::string path = t.file("model.safetensors");
  const std::vector<uint8_t> bytes = model_file_bytes(*m, g, params, state, {{"extra", "x"}});
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));

  const ModelFile f = read_model_file(path);
  EXPECT_EQ(f.input_shape, (Shape{2, 5, 5}));
  EXPECT_EQ(f.num_classes, 4);
  EXPECT_EQ(f.file.metadata().at("extra"), "x");
  const auto back = build_model_from_file(f, cpu_backend());
  ASSERT_EQ(back->num_params(), m->num_params());
  ASSERT_EQ(back->num_state(), m->num_state());
  EXPECT_EQ(std::memcmp(back->params(), params.data(), params.size() * 4), 0);
  EXPECT_EQ(std::memcmp(back->state(), state.data(), state.size() * 4), 0);
  std::vector<float> x(3 * 50);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i));
  StepInfo eval;
  eval.training = false;
  const float* y0 = m->forward(x.data(), 3, eval);
  const std::vector<float> want(y0, y0 + 12);
  const float* y1 = back->forward(x.data(), 3, eval);
  EXPECT_EQ(std::memcmp(y1, want.data(), want.size() * 4), 0);
}

// Writes `bytes` with `edit` applied to its header JSON, and returns read_model_file's error.
std::string model_file_error(const std::function<void(nlohmann::json&)>& edit) {
  const GraphSpec g = graph_from_string(kGraph, "g.toml");
  const auto m = graph_model(g);
  const std::vector<float> params(m->params(), m->params() + m->num_params());
  const std::vector<float> state(m->state(), m->state() + m->num_state());
  std::vector<uint8_t> bytes = model_file_bytes(*m, g, params, state);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  nlohmann::json h = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  edit(h);
  const std::string text = h.dump();
  TempDir t;
  const std::string path = t.file("m.safetensors");
  std::vector<uint8_t> out =
      file_of(text, std::vector<uint8_t>(bytes.begin() + 8 + long(n), bytes.end()));
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
  try {
    build_model_from_file(read_model_file(path), cpu_backend());
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path, 0), 0u) << "the error names the file: " << msg;
    return msg;
  }
  return "";
}

TEST(ModelFile, RefusesAMissingOrNewerFormatVersion) {
  EXPECT_NE(model_file_error([](auto& h) {
              h["__metadata__"].erase("format_version");
            }).find("no \"format_version\" in the metadata"),
            std::string::npos);
  EXPECT_NE(model_file_error([](auto& h) {
              h.erase("__metadata__");
            }).find("no \"format_version\" in the metadata"),
            std::string::npos);
  EXPECT_NE(model_file_error([](auto& h) {
              h["__metadata__"]["format_version"] = "2";
            }).find("model file format version 2; this build reads version 1"),
            std::string::npos);
  EXPECT_NE(model_file_error([](auto& h) {
              h["__metadata__"]["format_version"] = "1x";
            }).find("not a version number"),
            std::string::npos);
  EXPECT_NE(model_file_error([](auto& h) {
              h["__metadata__"]["input_shape"] = "[0]";
            }).find("metadata \"input_shape\""),
            std::string::npos);
  EXPECT_NE(model_file_error([](auto& h) {
              h["__metadata__"]["graph"] = "[[layer]]\ntype = \"conv9d\"\n";
            }).find("does not build"),
            std::string::npos);
}

TEST(ModelFile, TensorsThatDoNotMatchTheGraphAreRefusedNamingThem) {
  // Renamed: the model's tensor is missing.
  EXPECT_NE(model_file_error([](auto& h) {
              h["conv2d_0.kernel"] = h["conv2d_0.weight"];
              h.erase("conv2d_0.weight");
            }).find("no tensor 'conv2d_0.weight'"),
            std::string::npos);
  // Same size, another shape (a transposed weight).
  EXPECT_NE(model_file_error([](auto& h) {
              h["linear_0.weight"]["shape"] = {36, 4};
            }).find("tensor 'linear_0.weight' has shape [36, 4]; the model needs [4, 36]"),
            std::string::npos);
  // A tensor the model does not have: the file of a graph with BatchNorm loaded into the same
  // graph without it.
  const GraphSpec g = graph_from_string(kGraph, "g.toml");
  const auto m = graph_model(g);
  const std::vector<float> params(m->params(), m->params() + m->num_params());
  const std::vector<float> state(m->state(), m->state() + m->num_state());
  const std::vector<uint8_t> bytes = model_file_bytes(*m, g, params, state);
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "bn.safetensors");
  GraphSpec no_bn = g;
  no_bn.layers.erase(no_bn.layers.begin() + 1);
  const auto other = graph_model(no_bn);
  try {
    load_model_tensors(*other, f);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "bn.safetensors: tensor 'batchnorm2d_0.weight' is not a parameter or state"),
              std::string::npos)
        << e.what();
  }
}

// An input shape (or graph) in the metadata that does not fit the tensors is refused before
// the model's buffers are allocated: [2, 2000, 2000] would make a linear layer of 48 million
// weights (and as many gradients) before the tensors' shapes were compared.
TEST(ModelFile, AnInputShapeThatDoesNotFitTheTensorsIsRefusedBeforeAllocating) {
  const std::string e =
      model_file_error([](auto& h) { h["__metadata__"]["input_shape"] = "[2,2000,2000]"; });
  EXPECT_NE(e.find("the graph and input_shape [2, 2000, 2000] in its metadata make a model of"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("its tensors hold"), std::string::npos) << e;
}

// A weight or state value that is NaN or Inf: a damaged or foreign file, refused naming the
// file, the tensor and the element (a model built on it answers NaN for every input).
TEST(ModelFile, NonFiniteTensorValuesAreRefusedNamingThem) {
  const GraphSpec g = graph_from_string(kGraph, "g.toml");
  const auto m = graph_model(g);
  for (bool in_state : {false, true}) {
    std::vector<float> params(m->params(), m->params() + m->num_params());
    std::vector<float> state(m->state(), m->state() + m->num_state());
    (in_state ? state : params)[1] =
        in_state ? std::numeric_limits<float>::infinity() : std::nanf("");
    const std::vector<uint8_t> bytes = model_file_bytes(*m, g, params, state);
    const SafetensorsFile f = SafetensorsFile::parse(bytes, "nan.safetensors");
    const auto other = graph_model(g);
    try {
      load_model_tensors(*other, f);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(in_state ? "nan.safetensors: tensor "
                                                      "'batchnorm2d_0.running_mean' holds Inf at "
                                                      "element 1"
                                                    : "nan.safetensors: tensor 'conv2d_0.weight' "
                                                      "holds NaN at element 1"),
                std::string::npos)
          << e.what();
    }
  }
}

// An imported ONNX network: its graph written as TOML in the metadata and its weights as
// tensors rebuild the model with PyTorch's outputs (the fixture holds BatchNorm and convs).
TEST(ModelFile, AnImportedOnnxModelRoundTripsThroughTheFile) {
  if (!onnx_import_built()) GTEST_SKIP() << "this loom was built without libonnx-dev";
  const Shape in = {1, 8, 8};
  const GraphSpec g =
      graph_from_onnx(std::string(LOOM_SOURCE_DIR) + "/tests/data/onnx/convnet.onnx", in);
  std::unique_ptr<Model> m;
  try {
    m = std::make_unique<Model>(cpu_backend(), in, 10, build_nodes(g, in));
  } catch (const ConfigError& e) {
    GTEST_SKIP() << "the fixture does not build here: " << e.what();
  }
  m->init_params(3);  // the imported weights, not draws
  const std::vector<float> params(m->params(), m->params() + m->num_params());
  const std::vector<float> state(m->state(), m->state() + m->num_state());
  TempDir t;
  const std::string path = t.file("convnet.safetensors");
  const std::vector<uint8_t> bytes = model_file_bytes(*m, g, params, state);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  const auto back = build_model_from_file(read_model_file(path), cpu_backend());
  std::vector<float> x(2 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.3f);
  StepInfo eval;
  eval.training = false;
  const float* y0 = m->forward(x.data(), 2, eval);
  const std::vector<float> want(y0, y0 + 2 * m->num_classes());
  const float* y1 = back->forward(x.data(), 2, eval);
  EXPECT_EQ(std::memcmp(y1, want.data(), want.size() * 4), 0);
}

}  // namespace
}  // namespace loom::nn
