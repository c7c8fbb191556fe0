#include "loom/train/run_data.h"

#include <fmt/format.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/data/sources/set_checks.h"
#include "loom/data/sources/shard_source.h"
#include "loom/data/sources/token_windows.h"
#include "loom/data/sources/validation_split.h"
#include "loom/plan/data_reader.h"
#include "loom/train/run_identity.h"

namespace loom::train {
namespace {

// A token run's data.validation fraction: the last round(fraction x tokens) tokens of the stream
// are the validation windows (offset 0), the tokens before them the training windows -- a split
// by position, so no validation token is ever trained on, not even as a label.
HeldOut hold_out_token_tail(const data::ValidationChoice& choice, const Settings& s, int workers,
                            std::shared_ptr<const data::SampleSource>& train,
                            const TokenRun& tokens) {
  const double fraction = choice.fraction;
  const std::string& where = choice.where;
  const int64_t n = tokens.shard->size();
  const int64_t held = std::min<int64_t>(n, std::llround(fraction * double(n)));
  const int64_t cut = n - held;
  data::WindowOptions val;
  val.context = tokens.context;
  val.begin = cut;
  data::WindowOptions tr = val;
  tr.begin = 0;
  tr.end = cut;
  tr.random_offset = s.shuffle;
  tr.seed = s.seed;
  const int64_t val_windows = data::window_count(held, tokens.context, false);
  const int64_t train_windows = data::window_count(cut, tokens.context, tr.random_offset);
  const int64_t per_worker = s.batch * s.accumulate;
  if (val_windows < 1)
    throw ConfigError(fmt::format(
        "{}: data.validation = {} holds out the last {} of {} tokens, fewer than one window of "
        "data.context = {} and the token after it: raise it",
        where, fraction, held, n, tokens.context));
  if (train_windows < per_worker * workers)
    throw ConfigError(fmt::format(
        "{}: data.validation = {} leaves {} tokens to train on, {} windows of data.context = {}, "
        "fewer than one global batch ({} workers x {}): lower it",
        where, fraction, cut, train_windows, tokens.context, workers, per_worker));
  HeldOut h;
  h.set = data::materialise(data::TokenWindowSource(tokens.shard, val),
                            fmt::format("tokens [{}, {})", cut, n));
  const int64_t range[2] = {cut, n};
  h.fingerprint = fnv1a64(range, sizeof range);
  if (h.fingerprint == 0) h.fingerprint = 1;
  h.describe = fmt::format("the last {:g}% of the tokens, [{}, {}), as {} windows", 100 * fraction,
                           cut, n, val_windows);
  train = std::make_shared<data::TokenWindowSource>(tokens.shard, tr);
  return h;
}

}  // namespace

// data.validation: a fraction of the training source held out (`train` becomes the rest), or a
// shard file. ConfigError/InputError naming the key or the file when the split leaves too few
// samples to train on or to evaluate, or the file does not fit the training data. Before any
// worker starts, so a bad split never touches output.dir.
HeldOut hold_out_validation(const Settings& s, const data::PipelineConfig& pipeline, int workers,
                            std::shared_ptr<const data::SampleSource>& train,
                            const TokenRun& tokens) {
  const data::ValidationChoice& choice = pipeline.validation;
  HeldOut h;
  const std::string& where = choice.where;
  if (s.keep_best && !choice.enabled())
    throw ConfigError(
        fmt::format("{}: train.keep_best keeps the weights of the best validation figure: set "
                    "data.validation (a fraction of the training data, or a shard file) too",
                    s.keep_best_where));
  if (s.keep_best && !s.eval)
    throw ConfigError(
        fmt::format("{}: train.keep_best needs the validation figures that eval = false turns off",
                    s.keep_best_where));
  if (!choice.enabled()) return h;
  const int64_t per_worker = s.batch * s.accumulate;
  if (!choice.shards.empty()) {
    if (pipeline.train_shards.empty())
      throw ConfigError(fmt::format(
          "{}: data.validation = \"{}\" (a shard file) needs data.train_shards too: the "
          "validation set must be normalised like the training shards (or give a fraction)",
          where, choice.shards));
    if (tokens.enabled) {
      h.set = token_eval_set(tokens, choice.shards, "validation");
    } else {
      h.set = data::materialise(data::ShardSource(choice.shards), choice.shards);
      data::check_held_out_set(*train, pipeline.train_shards, *h.set, choice.shards, "validation");
    }
    h.describe = choice.shards;
    // A file is its own split: the training records stay as they are. Its contents tell a
    // resume whether it validates on the same set.
    h.fingerprint = fnv1a64(h.set->features.data(), h.set->features.size() * sizeof(float),
                            fnv1a64(h.set->labels.data(), h.set->labels.size() * sizeof(int32_t)));
    if (h.fingerprint == 0) h.fingerprint = 1;
  } else if (tokens.enabled) {
    return hold_out_token_tail(choice, s, workers, train, tokens);
  } else {
    const int64_t count = train->count();
    data::ValidationSplit split = data::split_for_validation(count, choice.fraction, s.seed);
    const int64_t held = int64_t(split.validation.size());
    if (held < per_worker * workers)
      throw ConfigError(fmt::format(
          "{}: data.validation = {} holds out {} of the {} training samples, fewer than one "
          "batch per worker ({} workers x {}): too few to give a validation figure; raise it",
          where, choice.fraction, held, count, workers, per_worker));
    if (int64_t(split.train.size()) < per_worker * workers)
      throw ConfigError(fmt::format(
          "{}: data.validation = {} holds out {} of the {} training samples and leaves {}, "
          "fewer than one global batch ({} workers x {}): nothing left to train on; lower it",
          where, choice.fraction, held, count, split.train.size(), workers, per_worker));
    h.fingerprint = fnv1a64(split.validation.data(), split.validation.size() * sizeof(int64_t));
    if (h.fingerprint == 0) h.fingerprint = 1;
    h.set = data::materialise(data::SubsetSource(train, split.validation),
                              fmt::format("validation split of {}", held));
    h.describe = fmt::format("{:g}% of the training data held out", 100 * choice.fraction);
    train = std::make_shared<data::SubsetSource>(train, std::move(split.train));
  }
  return h;
}

// The model's outputs per sample: one per class, or one per float target (regression).
int output_size(const data::SampleSource& s) {
  return s.target_numel() > 0 ? int(s.target_numel()) : s.num_classes();
}

// loss.type against what the data holds: cross-entropy needs class labels, mse float targets.
void check_loss_fits_data(const nn::LossOptions& loss, const data::SampleSource& s,
                          const std::string& data_name) {
  const nn::LossKind kind = loss.kind;
  const bool targets = s.target_numel() > 0;
  if (kind == nn::LossKind::kMse && !targets)
    throw ConfigError(fmt::format(
        "{}: loss.type = \"mse\" needs float targets; {} holds class labels (convert regression "
        "data with `loom data convert X.npy OUT --targets Y.npy`)",
        loss.where, data_name));
  if (kind == nn::LossKind::kCrossEntropy && targets)
    throw ConfigError(fmt::format(
        "{}: {} holds {} float targets per sample (regression): set loss.type = \"mse\"",
        loss.where, data_name, s.target_numel()));
}

RunSets open_run_sets(const Settings& s, const data::PipelineConfig& pipeline,
                      const TrainOptions& options, const TokenRun& tokens) {
  RunSets r;
  const bool in_memory = options.train_data != nullptr;
  r.train_name = in_memory                       ? options.data_name
                 : pipeline.train_shards.empty() ? s.data_dir
                                                 : pipeline.train_shards;
  r.test_name = in_memory                      ? options.data_name
                : pipeline.test_shards.empty() ? s.data_dir
                                               : pipeline.test_shards;
  r.has_test =
      in_memory ? options.test_data != nullptr : !(tokens.enabled && pipeline.test_shards.empty());
  if (in_memory) {
    r.train = options.train_data;
  } else if (tokens.enabled) {
    // The whole stream until data.validation takes its tail; the test stream is optional.
    data::WindowOptions wo;
    wo.context = tokens.context;
    wo.random_offset = s.shuffle;
    wo.seed = s.seed;
    r.train = std::make_shared<data::TokenWindowSource>(tokens.shard, wo);
    if (s.eval && !pipeline.test_shards.empty())
      r.test = token_eval_set(tokens, pipeline.test_shards, "test");
  } else if (!pipeline.train_shards.empty()) {
    if (s.eval && pipeline.test_shards.empty())
      throw ConfigError(
          fmt::format("{}: data.train_shards needs data.test_shards too (or eval = "
                      "false): the test set must be normalised like the shards",
                      pipeline.train_shards_where));
    r.train = std::make_shared<data::ShardSource>(pipeline.train_shards);
    if (!pipeline.test_shards.empty())
      r.test = data::materialise(data::ShardSource(pipeline.test_shards), "shards");
  } else {
    data::Normalisation norm;
    r.train_set = std::make_unique<data::Dataset>(
        data::load_fashion_mnist(s.data_dir, true, std::nullopt, &norm));
    r.test = data::load_fashion_mnist(s.data_dir, false, norm, nullptr);
    r.input_norm = norm;
    r.train = std::make_shared<data::DatasetSource>(*r.train_set);
  }
  return r;
}

DataShape read_data_shape(const Settings& s, const data::PipelineConfig& pipeline) {
  const TokenRun tokens = open_token_run(pipeline);
  const RunSets sets = open_run_sets(s, pipeline, TrainOptions{}, tokens);
  DataShape d;
  d.sample = sets.train->sample_shape();
  d.outputs = output_size(*sets.train);
  d.count = sets.train->count();
  d.record_bytes = sets.train->stored_record_bytes();
  d.tokens = tokens.enabled;
  return d;
}

}  // namespace loom::train
