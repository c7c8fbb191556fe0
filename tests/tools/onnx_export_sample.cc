// A test helper, not a loom command: trains a model of the zoo (or a graph file) for a few SGD
// steps on Fashion-MNIST, so its weights and BatchNorm statistics are those of a network in
// training rather than of its initialisation, then writes what an outside runtime needs to
// check loom's ONNX export (tests/scripts/onnx_export_onnxruntime_test.sh):
//   OUT/model.onnx   the export (nn/io/onnx_export.h)
//   OUT/x.npy        float32 [samples, C, H, W]: the first test images, normalised as loom does
//   OUT/labels.npy   int64 [samples]
//   OUT/logits.npy   float32 [samples, classes]: loom's forward in evaluation
//
// usage: loom_onnx_export_sample MODEL OUT [--steps N] [--samples N] [--batch N] [--lr X]
//                                [--data-dir DIR] [--set key=value]...
// MODEL: mlp, cnn, a zoo graph or a .toml graph file (the `model` key of a run config).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/data/formats/npy.h"
#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/io/onnx_export.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "loom_onnx_export_sample: %s\nusage: loom_onnx_export_sample MODEL OUT [--steps N] "
               "[--samples N] [--batch N] [--lr X] [--data-dir DIR] [--set key=value]...\n",
               why.c_str());
  std::exit(2);
}

int run(int argc, char** argv) {
  using namespace loom;
  if (argc < 3) usage("MODEL and OUT are required");
  const std::string model_name = argv[1], out = argv[2];
  int64_t steps = 100, samples = 500, batch = 64;
  double lr = 0.05;
  std::string data_dir = data::kDefaultFashionMnistDir;
  Config cfg;
  cfg.set("model", model_name);
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--steps")
      steps = std::stoll(v);
    else if (a == "--samples")
      samples = std::stoll(v);
    else if (a == "--batch")
      batch = std::stoll(v);
    else if (a == "--lr")
      lr = std::stod(v);
    else if (a == "--data-dir")
      data_dir = v;
    else if (a == "--set")
      cfg.set_override(v);
    else
      usage("unknown option " + a);
  }
  if (steps < 0 || samples < 1 || batch < 1) usage("--steps, --samples or --batch out of range");
  if (std::filesystem::exists(out)) usage(out + " exists; give a fresh folder");

  data::Normalisation norm;
  const data::Dataset train = data::load_fashion_mnist(data_dir, true, std::nullopt, &norm);
  const data::Dataset test = data::load_fashion_mnist(data_dir, false, norm, nullptr);
  const nn::Shape shape = train.sample_shape;
  const int classes = train.num_classes;
  auto model = nn::build_model(plan::read_model_spec(cfg), cpu_backend(), shape, classes);
  model->init_params(1);

  // Plain SGD on shuffled batches: weights that have moved from their draw, and BatchNorm
  // running statistics of real activations.
  const int64_t d = train.sample_numel();
  Rng rng(3, 0, RngPurpose::kShuffle);
  std::vector<float> x(static_cast<size_t>(batch * d));
  std::vector<int32_t> y(static_cast<size_t>(batch));
  double loss = 0;
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t k = int64_t(rng.next_u64() % uint64_t(train.count));
      std::copy_n(train.features.begin() + k * d, d, x.begin() + b * d);
      y[size_t(b)] = train.labels[size_t(k)];
    }
    model->forward(x.data(), batch, nn::StepInfo{true, uint64_t(s) + 1, s * batch});
    loss = model->loss(y.data(), 1.0f / float(batch)).loss_sum / double(batch);
    model->backward();
    for (int64_t k = 0; k < model->num_params(); ++k)
      model->params()[k] -= float(lr) * model->grads()[k];
  }

  samples = std::min(samples, test.count);
  const std::vector<float> tx(test.features.begin(), test.features.begin() + samples * d);
  std::vector<float> logits(static_cast<size_t>(samples * classes));
  int64_t correct = 0;
  for (int64_t at = 0; at < samples; at += batch) {
    const int64_t n = std::min(batch, samples - at);
    const float* z = model->forward(tx.data() + at * d, n, nn::StepInfo{false, 0, at});
    std::copy_n(z, n * classes, logits.begin() + at * classes);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = z + i * classes;
      const int64_t best = std::max_element(row, row + classes) - row;
      correct += best == test.labels[size_t(at + i)];
    }
  }
  std::vector<int64_t> labels(test.labels.begin(), test.labels.begin() + samples);

  std::filesystem::create_directories(out);
  nn::OnnxExportOptions o;
  o.doc = "loom_onnx_export_sample " + model_name;
  nn::export_onnx(*model, model->params(), model->state(), out + "/model.onnx", o);
  std::vector<int64_t> xs = {samples};
  xs.insert(xs.end(), shape.begin(), shape.end());
  data::write_npy(out + "/x.npy", data::NpyDtype::kFloat32, xs, tx.data());
  data::write_npy(out + "/labels.npy", data::NpyDtype::kInt64, {samples}, labels.data());
  data::write_npy(out + "/logits.npy", data::NpyDtype::kFloat32, {samples, classes}, logits.data());
  std::printf(
      "%s: %lld SGD steps (last loss %.4f), %lld params, loom accuracy %.4f on %lld "
      "test samples -> %s\n",
      model_name.c_str(), (long long)steps, loss, (long long)model->num_params(),
      double(correct) / double(samples), (long long)samples, out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom_onnx_export_sample: %s\n", e.what());
    return int(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_onnx_export_sample: %s\n", e.what());
    return 1;
  }
}
