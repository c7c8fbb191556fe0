#include "loom/train/trained_model.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "loom/core/error.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/shard_source.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/io/model_file.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_format.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

TrainedModel from_model_file(const std::string& file, Backend& backend) {
  nn::ModelFile f = nn::read_model_file(file);
  TrainedModel m;
  m.model = nn::build_model_from_file(f, backend);
  m.graph = std::move(f.graph);
  m.input_shape = f.input_shape;
  m.num_classes = f.num_classes;
  m.weights = file;
  const TrainedModelMetadata meta = read_trained_model_metadata(f.file.metadata(), file);
  m.steps = meta.steps;
  m.input_normalisation = meta.input_normalisation;
  m.loss = meta.loss;
  m.model->set_loss_kind(m.loss);
  const fs::path config = fs::path(file).parent_path() / "config.toml";
  if (fs::is_regular_file(config)) {
    m.run = plan::read_saved_run_file(config.string());
  }
  return m;
}

// The data's per-sample shape and classes, for a checkpoint that does not record them: the
// config's training shards, or its IDX test set.
void shape_from_data(const plan::SavedRun& run, nn::Shape& shape, int& classes) {
  const data::PipelineConfig& p = run.pipeline;
  if (!p.train_shards.empty()) {
    const data::ShardSource s(p.train_shards);
    shape = s.sample_shape();
    classes = s.num_classes();
    return;
  }
  const data::Dataset test =
      data::load_fashion_mnist(run.data_dir, false, data::Normalisation{}, nullptr);
  shape = test.sample_shape;
  classes = test.num_classes;
}

TrainedModel from_checkpoint(const std::string& dir, Backend& backend) {
  const std::string path = (fs::path(dir) / "train.ckpt").string();
  const CheckpointFile ckpt = CheckpointFile::read(path);
  TrainedModel m;
  m.weights = path;
  m.from_checkpoint = true;
  m.run = plan::read_saved_run(ckpt.text("config"), path + ":config");
  m.steps = ckpt.i64("position", 5)[0];
  if (ckpt.has(kCheckpointInputShape) && ckpt.has(kCheckpointNumClasses)) {
    m.input_shape = ckpt.i64(kCheckpointInputShape);
    m.num_classes = int(ckpt.i64(kCheckpointNumClasses, 1)[0]);
    for (int64_t d : m.input_shape)
      if (d < 1 || d > (int64_t(1) << 31))
        throw InputError(
            fmt::format("{}: section '{}' holds a dimension {}", path, kCheckpointInputShape, d));
    if (m.input_shape.empty() || m.num_classes < 1)
      throw InputError(fmt::format("{}: sections '{}' and '{}' name no model input", path,
                                   kCheckpointInputShape, kCheckpointNumClasses));
  } else {
    shape_from_data(*m.run, m.input_shape, m.num_classes);
  }
  m.graph = nn::model_graph(m.run->model, m.input_shape, m.num_classes);
  m.model = std::make_unique<nn::Model>(backend, m.input_shape, m.num_classes,
                                        nn::build_nodes(m.graph, m.input_shape));
  m.loss = m.run->loss.kind;
  m.model->set_loss_kind(m.loss);
  const std::vector<float> params = ckpt.f32("params");
  if (int64_t(params.size()) != m.model->num_params())
    throw InputError(
        fmt::format("{}: section 'params' holds {} parameters; the model of its config has {} (a "
                    "model-parallel run's checkpoint holds only rank 0's slices)",
                    path, params.size(), m.model->num_params()));
  // Saved weights are finite (a step with NaN or Inf never reaches a checkpoint), so one that
  // is not is a damaged or foreign file: named here rather than answering NaN for every input.
  auto check_finite = [&](const std::vector<float>& v, const char* section) {
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("{}: section '{}' holds {} at element {}", path, section,
                                     std::isnan(v[i]) ? "NaN" : "Inf", i));
  };
  check_finite(params, "params");
  if (!params.empty())
    backend.copy_to_device(m.model->params(), params.data(), params.size() * sizeof(float));
  if (m.model->num_state() > 0) {
    const std::vector<float> state = ckpt.f32("model.state", m.model->num_state());
    check_finite(state, "model.state");
    backend.copy_to_device(m.model->state(), state.data(), state.size() * sizeof(float));
  }
  return m;
}

}  // namespace

TrainedModel load_trained_model(const std::string& path, Backend& backend) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return from_model_file(path, backend);
  if (!fs::is_directory(p, ec))
    throw InputError(fmt::format("{}: no such run directory, checkpoint or model file", path));
  if (fs::is_regular_file(p / nn::kModelFileName, ec))
    return from_model_file((p / nn::kModelFileName).string(), backend);
  if (fs::exists(p / "train.ckpt", ec) || fs::is_directory(p / "checkpoints", ec) ||
      p.filename() == "checkpoints")
    return from_checkpoint(find_latest_checkpoint(path), backend);
  throw InputError(fmt::format(
      "{}: holds neither {} (written at the end of a run) nor a checkpoint (train.ckpt, or "
      "checkpoints/step-N)",
      path, nn::kModelFileName));
}

std::map<std::string, std::string> trained_model_metadata(
    int64_t steps, const std::optional<data::Normalisation>& input_normalisation,
    nn::LossKind loss) {
  std::map<std::string, std::string> m;
  m[kStepsKey] = std::to_string(steps);
  m[kLossKey] = nn::loss_kind_name(loss);
  // fmt's shortest form reads back to the same float, so an evaluation normalises exactly as
  // the run did.
  if (input_normalisation) {
    m[kMeanKey] = fmt::format("{}", input_normalisation->mean);
    m[kStddevKey] = fmt::format("{}", input_normalisation->stddev);
  }
  return m;
}

}  // namespace loom::train
