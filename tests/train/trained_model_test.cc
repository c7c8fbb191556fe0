// What a run leaves for use after training: model.safetensors holds the final parameters and
// state bit for bit, load_trained_model rebuilds the trained model from it or from a checkpoint,
// and evaluating the loaded model reproduces the training loop's own test accuracy.
#include "loom/train/trained_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/io/model_file.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"
#include "loom/train/evaluation.h"
#include "loom/train/forward_settings.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

// The residual graph with BatchNorm over 2 workers, 10 steps, checkpoints every 5 (the last one
// at the final step).
Config residual_run(const std::string& out) {
  Config cfg = testing::with_tiny_residual_graph(testing::tiny_run(2, 32, 10));
  cfg.set("output.dir", out);
  cfg.set("train.checkpoint_every", int64_t(5));
  return cfg;
}

// Eval-mode outputs of `model` on a fixed batch of 5 images.
std::vector<float> outputs(nn::Model& model) {
  std::vector<float> x(size_t(5 * 784));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 1.5f;
  nn::StepInfo info;
  info.training = false;
  const float* y = model.forward(x.data(), 5, info);
  return std::vector<float>(y, y + 5 * model.num_classes());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(TrainedModel, ModelFileHoldsTheFinalParametersAndStateBitForBit) {
  TempDir dir;
  const TrainResult r = run_training(plan::read_run_plan(residual_run(dir.path())));
  ASSERT_EQ(r.model_file, (fs::path(dir.path()) / "model.safetensors").string());
  ASSERT_FALSE(r.final_state.empty());
  // Trained running statistics: not the initial zeros and ones.
  EXPECT_NE(r.final_state[0], 0.0f);

  const nn::ModelFile f = nn::read_model_file(r.model_file);
  EXPECT_EQ(f.input_shape, (nn::Shape{1, 28, 28}));
  EXPECT_EQ(f.num_classes, 10);
  EXPECT_EQ(f.file.metadata().at("steps"), "10");
  const auto model = nn::build_model_from_file(f, cpu_backend());
  ASSERT_EQ(model->num_params(), int64_t(r.final_params.size()));
  ASSERT_EQ(model->num_state(), int64_t(r.final_state.size()));
  int64_t covered = 0;
  for (const nn::ModelTensor& t : nn::model_tensors(*model)) {
    const nn::SafetensorsTensor* st = f.file.find(t.name);
    ASSERT_TRUE(st) << t.name;
    const std::vector<float>& flat = t.state ? r.final_state : r.final_params;
    const std::vector<float> want(flat.begin() + t.offset, flat.begin() + t.offset + t.count);
    EXPECT_TRUE(same_bits(f.file.f32(*st), want)) << t.name;
    covered += t.count;
  }
  EXPECT_EQ(covered, int64_t(r.final_params.size() + r.final_state.size()));
  EXPECT_EQ(f.file.tensors().size(), nn::model_tensors(*model).size());
  // The tensors a reader of the residual graph expects, by PyTorch's names and shapes.
  ASSERT_TRUE(f.file.find("conv2d_0.weight"));
  EXPECT_EQ(f.file.find("conv2d_0.weight")->shape, (std::vector<int64_t>{4, 1, 3, 3}));
  ASSERT_TRUE(f.file.find("batchnorm2d_1.running_var"));
  EXPECT_EQ(f.file.find("linear_0.weight")->shape, (std::vector<int64_t>{32, 784}));
}

TEST(TrainedModel, LoadedFromTheModelFileOrACheckpointItGivesTheTrainedModelsOutputs) {
  TempDir dir;
  const Config cfg = residual_run(dir.path());
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  // The trained model: the config's model holding the run's final parameters and state.
  const auto trained = nn::build_model(plan::read_model_spec(cfg), cpu_backend(), {1, 28, 28}, 10);
  std::memcpy(trained->params(), r.final_params.data(), r.final_params.size() * 4);
  std::memcpy(trained->state(), r.final_state.data(), r.final_state.size() * 4);
  const std::vector<float> want = outputs(*trained);

  const TrainedModel from_file = load_trained_model(dir.path(), cpu_backend());
  EXPECT_FALSE(from_file.from_checkpoint);
  EXPECT_TRUE(from_file.run.has_value());
  EXPECT_EQ(from_file.steps, 10);
  EXPECT_TRUE(from_file.input_normalisation.has_value());
  EXPECT_TRUE(same_bits(outputs(*from_file.model), want));

  const std::string ckpt = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(10)).string();
  const TrainedModel from_ckpt = load_trained_model(ckpt, cpu_backend());
  EXPECT_TRUE(from_ckpt.from_checkpoint);
  EXPECT_EQ(from_ckpt.steps, 10);
  EXPECT_EQ(from_ckpt.weights, ckpt + "/train.ckpt");
  EXPECT_TRUE(same_bits(outputs(*from_ckpt.model), want));

  // The run's checkpoints/ folder: its newest checkpoint; an earlier one differs.
  EXPECT_TRUE(same_bits(
      outputs(*load_trained_model(dir.path() + "/checkpoints", cpu_backend()).model), want));
  const std::string five = (fs::path(dir.path()) / "checkpoints" / checkpoint_name(5)).string();
  EXPECT_FALSE(same_bits(outputs(*load_trained_model(five, cpu_backend()).model), want));
}

// A checkpoint whose weights hold NaN (a damaged or foreign file: a step with NaN never reaches
// one) is refused naming the file and the section, rather than predicting NaN for every input.
TEST(TrainedModel, ACheckpointWithNonFiniteWeightsIsRefusedNamingTheSection) {
  TempDir dir;
  run_training(plan::read_run_plan(residual_run(dir.path())));
  const std::string path =
      (fs::path(dir.path()) / "checkpoints" / checkpoint_name(10) / "train.ckpt").string();
  CheckpointFile ckpt = CheckpointFile::read(path);
  std::vector<float> params = ckpt.f32("params");
  params[3] = std::nanf("");
  ckpt.put_f32("params", params);
  write_checkpoint_file(path, ckpt.serialize());
  try {
    load_trained_model(fs::path(path).parent_path().string(), cpu_backend());
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": section 'params' holds NaN at element 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(TrainedModel, PathsThatHoldNoModelAreRefusedNamingThem) {
  TempDir dir;
  try {
    load_trained_model(dir.path(), cpu_backend());
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path() + ": holds neither model.safetensors"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_trained_model(dir.file("nothing"), cpu_backend()), InputError);
}

TEST(TrainedModel, EvaluatingTheLoadedModelGivesTheTrainingLoopsTestAccuracy) {
  TempDir dir;
  Config cfg = testing::tiny_run(1, 64, 30);
  cfg.set("eval", true);
  cfg.set("output.dir", dir.path());
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  ASSERT_GT(r.test_acc, 0.2);

  const TrainedModel m = load_trained_model(dir.path(), cpu_backend());
  std::string source;
  const data::Dataset test = load_eval_set(m, "", &source);
  EXPECT_EQ(test.count, 10000);
  // The run's settings: 1 worker and 1 thread (tiny_run), so the same chunks of 1000 with the
  // same threads as the training loop's evaluation, and the same bits (docs/determinism.md).
  use_forward_threads(cpu_backend(), 1);
  const EvalResult e = evaluate_model(*m.model, test);
  EXPECT_EQ(e.accuracy, r.test_acc);
  EXPECT_GT(e.loss, 0.0);
  EXPECT_TRUE(std::isfinite(e.loss));
  // Rows are true classes: Fashion-MNIST's test set has 1000 of each; the diagonal is the hits.
  int64_t diagonal = 0;
  for (int t = 0; t < 10; ++t) {
    int64_t row = 0;
    for (int p = 0; p < 10; ++p) row += e.confusion[size_t(t * 10 + p)];
    EXPECT_EQ(row, 1000) << t;
    diagonal += e.confusion[size_t(t * 11)];
  }
  EXPECT_EQ(double(diagonal) / 10000.0, e.accuracy);
}

TEST(TrainedModel, AModelParallelRunWritesNoModelFileOfSlices) {
  TempDir dir;
  Config cfg = testing::tiny_run(2, 32, 3);
  cfg.set("parallel", std::string("model"));
  cfg.set("output.dir", dir.path());
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  EXPECT_EQ(r.model_file, "");
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "model.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "summary.json"));
}

}  // namespace
}  // namespace loom::train
