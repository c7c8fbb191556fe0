#include "loom/train/evaluation.h"

#include <fmt/format.h>

#include <filesystem>

#include "loom/core/error.h"
#include "loom/data/formats/token_shard.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/sample_source.h"
#include "loom/data/sources/shard_source.h"
#include "loom/data/sources/token_windows.h"
#include "loom/train/device_batch.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

// The t10k IDX files of `dir`, normalised as the run normalised its training data: the mean
// and deviation its model file records, else those of `train_dir`'s training images (what the
// training loop computes).
data::Dataset idx_test_set(const TrainedModel& m, const std::string& dir,
                           const std::string& train_dir) {
  std::optional<data::Normalisation> norm = m.input_normalisation;
  if (!norm) {
    data::Normalisation computed;
    data::load_fashion_mnist(train_dir, true, std::nullopt, &computed);
    norm = computed;
  }
  return data::load_fashion_mnist(dir, false, norm, nullptr);
}

// A token shard cut into the windows the model reads (its input is [context]), at offset 0 as
// the training run evaluated them.
data::Dataset token_windows(const TrainedModel& m, const std::string& path) {
  auto shard = std::make_shared<const data::TokenShard>(path);
  if (m.input_shape.size() != 1)
    throw InputError(
        fmt::format("{}: a token stream; the model takes samples of shape {}, not "
                    "windows of tokens",
                    path, nn::shape_text(m.input_shape)));
  if (shard->vocabulary().size != m.num_classes)
    throw InputError(fmt::format("{}: a vocabulary of {} tokens; the model predicts {}", path,
                                 shard->vocabulary().size, m.num_classes));
  data::WindowOptions wo;
  wo.context = m.input_shape[0];
  data::Dataset set = data::materialise(data::TokenWindowSource(shard, wo), path);
  set.token_unit = data::vocab_unit(shard->vocabulary().kind);
  return set;
}

// A shard file: token windows when it is a token stream, else its samples.
data::Dataset shard_set(const TrainedModel& m, const std::string& path) {
  if (data::is_token_shard(path)) return token_windows(m, path);
  return data::materialise(data::ShardSource(path));
}

}  // namespace

data::Dataset load_eval_set(const TrainedModel& m, const std::string& data_path,
                            std::string* source) {
  data::Dataset set;
  std::string from;
  if (data_path.empty()) {
    if (!m.run)
      throw InputError(fmt::format(
          "{}: no config.toml beside it names a test set; give one with --data", m.weights));
    const data::PipelineConfig& p = m.run->pipeline;
    if (!p.test_shards.empty()) {
      set = shard_set(m, p.test_shards);
      from = p.test_shards;
    } else if (p.context) {
      throw InputError(fmt::format(
          "{}: the run trained on token windows without data.test_shards: give a token shard "
          "to evaluate on with --data",
          m.weights));
    } else {
      const std::string& dir = m.run->data_dir;
      set = idx_test_set(m, dir, dir);
      from = dir;
    }
  } else {
    std::error_code ec;
    if (fs::is_directory(data_path, ec)) {
      const std::string train_dir = m.run ? m.run->data_dir : data_path;
      set = idx_test_set(m, data_path, train_dir);
    } else if (fs::exists(data_path, ec)) {
      set = shard_set(m, data_path);
    } else {
      throw InputError(fmt::format("{}: no such data file (shards) or directory (IDX)", data_path));
    }
    from = data_path;
  }
  if (set.sample_shape != m.input_shape)
    throw InputError(fmt::format("{}: samples of shape {}; the model takes {}", from,
                                 nn::shape_text(set.sample_shape), nn::shape_text(m.input_shape)));
  if (m.loss == nn::LossKind::kMse) {
    if (set.target_numel != m.num_classes)
      throw InputError(fmt::format("{}: {} float targets per sample; the regression model gives {}",
                                   from, set.target_numel, m.num_classes));
    if (set.count == 0) throw InputError(fmt::format("{}: no samples to evaluate", from));
    if (source) *source = from;
    return set;
  }
  if (set.target_numel > 0)
    throw InputError(
        fmt::format("{}: float targets (regression data); the model is a classifier", from));
  if (set.num_classes > m.num_classes)
    throw InputError(fmt::format("{}: labels of {} classes; the model has {}", from,
                                 set.num_classes, m.num_classes));
  for (size_t i = 0; i < set.labels.size(); ++i)
    if (set.labels[i] < 0 || set.labels[i] >= m.num_classes)
      throw InputError(fmt::format("{}: record {} has label {}; the model has {} classes", from, i,
                                   set.labels[i], m.num_classes));
  if (set.count == 0) throw InputError(fmt::format("{}: no samples to evaluate", from));
  if (source) *source = from;
  return set;
}

EvalResult evaluate_model(nn::Model& model, const data::Dataset& set, int64_t chunk) {
  // Token windows: one label per position; other sets one per sample.
  const int64_t per = set.labels_per_sample;
  if (model.output_positions() != per)
    throw InputError(
        fmt::format("the model gives {} outputs per sample; the set has {} label(s) per sample",
                    model.output_positions(), per));
  if (per > 1) chunk = std::max<int64_t>(1, chunk / per);  // forward_chunk() for the default
  EvalResult r;
  if (!set.token_unit.empty()) {
    r.tokens = set.count * per;
    r.token_unit = set.token_unit;
  }
  r.count = set.count;
  r.num_classes = model.num_classes();
  const int64_t k = r.num_classes;
  const int64_t numel = set.sample_numel();
  Backend& be = model.backend();
  DeviceBatch on_device(be);
  if (model.loss_kind() == nn::LossKind::kMse) {
    r.regression = true;
    double sum = 0;
    for (int64_t i = 0; i < set.count; i += chunk) {
      const int64_t n = std::min(chunk, set.count - i);
      nn::StepInfo info;
      info.training = false;
      const DeviceBatch::View v =
          on_device.put(set.features.data() + i * numel, set.labels.data() + i, n, numel);
      model.forward(v.x, n, info);
      sum +=
          model.mse_loss(on_device.put_targets(set.targets.data() + i * k, n * k), 1.0f).loss_sum;
    }
    r.loss = sum / double(set.count);
    r.accuracy = -1;
    return r;
  }
  r.confusion.assign(size_t(k * k), 0);
  std::vector<float> logits;
  double loss_sum = 0;
  int64_t right = 0;
  for (int64_t i = 0; i < set.count; i += chunk) {
    const int64_t n = std::min(chunk, set.count - i);
    nn::StepInfo info;
    info.training = false;
    const DeviceBatch::View v =
        on_device.put(set.features.data() + i * numel, set.labels.data() + i * per, n, numel, per);
    const float* out = model.forward(v.x, n, info);
    logits.resize(size_t(n * per * k));
    be.copy_to_host(logits.data(), out, logits.size() * sizeof(float));
    loss_sum += model.loss(v.y, 1.0f).loss_sum;
    for (int64_t s = 0; s < n * per; ++s) {
      const float* z = logits.data() + s * k;
      int64_t arg = 0;
      for (int64_t c = 1; c < k; ++c)
        if (z[c] > z[arg]) arg = c;
      const int64_t label = set.labels[size_t(i * per + s)];
      ++r.confusion[size_t(label * k + arg)];
      right += arg == label;
    }
  }
  r.loss = loss_sum / double(set.count * per);
  r.accuracy = double(right) / double(set.count * per);
  return r;
}

nlohmann::json eval_json(const EvalResult& r) {
  const int64_t k = r.num_classes;
  if (r.regression) return {{"count", r.count}, {"loss", r.loss}, {"mse", r.loss}, {"outputs", k}};
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json per_class = nlohmann::json::array();
  for (int64_t t = 0; t < k; ++t) {
    nlohmann::json row = nlohmann::json::array();
    int64_t total = 0;
    for (int64_t p = 0; p < k; ++p) {
      row.push_back(r.confusion[size_t(t * k + p)]);
      total += r.confusion[size_t(t * k + p)];
    }
    rows.push_back(row);
    per_class.push_back(
        {{"class", t},
         {"count", total},
         {"recall", total ? nlohmann::json(double(r.confusion[size_t(t * k + t)]) / double(total))
                          : nlohmann::json(nullptr)}});
  }
  nlohmann::json j = {{"count", r.count}, {"loss", r.loss},    {"accuracy", r.accuracy},
                      {"num_classes", k}, {"confusion", rows}, {"per_class", per_class}};
  if (!r.token_unit.empty()) {
    j["tokens"] = r.tokens;
    j["token_unit"] = r.token_unit;
    j["bits_per_" + r.token_unit] = r.loss / 0.6931471805599453;
  }
  return j;
}

std::string eval_text(const EvalResult& r) {
  const int64_t k = r.num_classes;
  if (r.regression)
    return fmt::format("samples {}  mean squared error {:.6g} (mean over {} outputs)\n", r.count,
                       r.loss, k);
  // Token windows: per-token figures; a confusion matrix of the vocabulary is not printed.
  if (!r.token_unit.empty())
    return fmt::format(
        "windows {}  tokens {}  loss {:.4f} nats/token = {:.4f} bits/{}  accuracy {:.4f} "
        "(per token; --json has the confusion matrix)\n",
        r.count, r.tokens, r.loss, r.loss / 0.6931471805599453, r.token_unit, r.accuracy);
  std::string out =
      fmt::format("samples {}  loss {:.4f}  accuracy {:.4f}\n", r.count, r.loss, r.accuracy);
  out += "confusion matrix (rows: true class, columns: predicted; recall at the right)\n";
  int64_t widest = 1;
  for (int64_t v : r.confusion)
    widest = std::max<int64_t>(widest, int64_t(fmt::format("{}", v).size()));
  const int w = int(std::max<int64_t>(widest, 3));
  out += fmt::format("{:>5} ", "");
  for (int64_t p = 0; p < k; ++p) out += fmt::format(" {:>{}}", p, w);
  out += "  recall\n";
  for (int64_t t = 0; t < k; ++t) {
    int64_t total = 0;
    out += fmt::format("{:>5} ", t);
    for (int64_t p = 0; p < k; ++p) {
      const int64_t v = r.confusion[size_t(t * k + p)];
      total += v;
      out += fmt::format(" {:>{}}", v, w);
    }
    out += total ? fmt::format("  {:.4f}\n", double(r.confusion[size_t(t * k + t)]) / double(total))
                 : std::string("  -\n");
  }
  return out;
}

}  // namespace loom::train
