// No config key is silently ignored. Every key `loom train` declares is walked across the
// combinations in which keys stop applying (the sync strategy, model parallelism, the codec, the
// optimizer, the learning-rate schedule and loss scaling, the model, the loss, the data, the
// outputs): set to a value other than its default, a key is either honoured (the run takes it)
// or refused with a ConfigError that names the key and where it was set. A run that left such a
// value out would record in config.toml a setting it never used.
//
// The table says, from what each key means, where it applies and where it does not; it is not
// derived from the checks in the code, so a check that is missing, or one that refuses a key
// where it applies, fails here. Each row trains one step of a small model on samples given in
// memory (TrainOptions::train_data), the same entry point and checks as `loom train`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"
#include "loom/plan/run_keys.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

using loom::data::testing::TempDir;

// What a row expects of its value in its combination.
enum class Expect {
  kHonoured,  // the key applies: the run takes the value and trains
  kRefused,   // the key does not apply: a ConfigError naming the key and where it was set
  // The key does not apply, yet the run accepts it today, for the reason in the row's note.
  // Held as accepted so that the table stays true: once loom refuses it, this row fails and
  // becomes kRefused.
  kKnownGap,
};

enum class Data {
  kImages,      // 48 samples of 1 x 8 x 8, 3 classes
  kFlat,        // 48 samples of 6 features, 3 classes
  kRegression,  // 48 samples of 6 features, one float target each
};

// A combination: what it sets on top of the base run. "{out}" in a value is a fresh directory
// for the run's outputs; "{run}" a directory that holds a run with a checkpoint.
struct Combination {
  std::vector<std::string> sets;  // "key=value", as `--set` takes them
  Data data = Data::kImages;
  std::string toml = "";  // parsed first ([[layer]] tables)
};

// The base run ("allreduce"): 2 workers, sync = "allreduce" over data parallelism, codec fp32,
// SGD with momentum, a constant learning rate, no loss scaling, the built-in MLP with
// cross-entropy on class labels, samples in memory, shuffled and read ahead, output.dir "" (so
// nothing is written), eval = false, no trace, the abort policy for NaN, no auto choice.
const std::map<std::string, Combination>& combinations() {
  static const std::map<std::string, Combination> c = {
      {"allreduce", {}},
      {"bmuf", {{"sync=bmuf"}}},
      {"ps", {{"sync=ps"}}},
      {"ps_stale", {{"sync=ps", "ps.staleness=1"}}},
      {"model_parallel", {{"parallel=model"}}},
      {"one_worker", {{"workers=1"}}},
      {"int8", {{"codec=int8", "max_steps=3"}}},
      {"fp16", {{"codec=fp16"}}},
      {"onebit", {{"codec=onebit"}}},
      {"topk", {{"codec=topk"}}},
      {"powersgd", {{"codec=powersgd"}}},
      {"auto", {{"codec=auto"}}},
      {"adam", {{"optim.name=adam"}}},
      {"step_lr", {{"lr.schedule=step"}}},
      {"cosine_lr", {{"lr.schedule=cosine"}}},
      {"dynamic_scale", {{"loss_scale.mode=dynamic"}}},
      {"cnn", {{"model=cnn"}}},
      {"layer_tables",
       {{},
        Data::kImages,
        "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nout = 3\n"}},
      {"regression", {{"loss.type=mse"}, Data::kRegression}},
      {"flat_data", {{}, Data::kFlat}},
      {"validation", {{"eval=true", "data.validation=0.25"}}},
      {"output", {{"output.dir={out}"}}},
      {"histograms", {{"output.dir={out}", "train.histograms=true"}}},
      {"resume", {{"output.dir={run}", "max_steps=2"}}},
      {"trace", {{"trace.file={out}/trace.json"}}},
      {"nan_skip", {{"train.nan_policy=skip"}}},
      {"no_shuffle", {{"data.shuffle=false"}}},
      {"no_prefetch", {{"data.prefetch=0"}}},
  };
  return c;
}

struct Row {
  const char* key;
  const char* value;  // TOML; "" for a key its combination sets ([[layer]])
  const char* combination;
  Expect expect;
  const char* note = "";  // kKnownGap: why it is not refused yet; else what the row shows
};

constexpr Expect H = Expect::kHonoured, R = Expect::kRefused, G = Expect::kKnownGap;

// Which keys apply when. One worker is a world of one, which runs the same strategy: the keys
// of the exchange apply to it as they do to N (a config must run on any world size).
const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      // The run's own keys.
      {"workers", "1", "allreduce", H},
      {"threads", "2", "allreduce", H},
      {"batch", "2", "allreduce", H},
      {"epochs", "2", "allreduce", H},
      {"max_steps", "2", "allreduce", H},
      {"seed", "7", "allreduce", H},
      {"transport", "\"thread\"", "allreduce", H},
      {"backend", "\"cuda\"", "allreduce", R, "device memory needs a device transport"},
      {"precision", "\"fp16\"", "allreduce", R, "fp16 runs on backend = \"cuda\" only"},
      {"eval", "true", "allreduce", H},
      {"progress", "\"lines\"", "allreduce", H},
      {"output.dir", "\"{out}\"", "allreduce", H},
      {"train.accumulate", "2", "allreduce", H},
      {"train.keep_best", "true", "validation", H},
      {"train.keep_best", "true", "allreduce", R, "no validation figures to choose by"},
      {"train.log_every", "1", "output", H},
      {"train.log_every", "1", "allreduce", G,
       "with output.dir \"\" the step lines go nowhere unless TrainOptions::keep_results keeps "
       "them, which the config does not know"},
      {"train.histograms", "true", "output", H},
      {"train.histograms", "true", "allreduce", R, "output.dir \"\": nowhere to write them"},
      {"train.histogram_every", "2", "histograms", H},
      {"train.histogram_every", "2", "allreduce", R, "train.histograms is off"},
      {"log.level", "\"error\"", "allreduce", H},
      {"data.dir", "\"/nowhere\"", "allreduce", R, "the samples are given in memory"},
      {"data.prefetch", "0", "allreduce", H},
      {"data.shuffle", "false", "allreduce", H},
      {"comm.timeout_s", "10.0", "allreduce", H},
      {"comm.ring_chunk_kib", "64", "allreduce", H},
      {"comm.small_kib", "1", "allreduce", H},
      {"comm.node_shm", "false", "allreduce", G,
       "applies to MPI ranks only; the transport is resolved in the training loop, which does "
       "not refuse it for the thread transport yet"},

      // The model and the loss.
      {"model", "\"cnn\"", "allreduce", H},
      {"model", "\"mlp\"", "layer_tables", R, "the model given twice"},
      {"layer.", "", "layer_tables", H},
      {"loss.type", "\"mse\"", "regression", H},
      {"loss.type", "\"mse\"", "allreduce", R, "class labels have no float targets"},
      {"loss.label_smoothing", "0.1", "allreduce", H},
      {"loss.label_smoothing", "0.1", "regression", R},
      {"loss.ignore_index", "1", "allreduce", H},
      {"loss.ignore_index", "1", "regression", R},
      {"mlp.hidden", "[16]", "allreduce", H},
      {"mlp.hidden", "[16]", "cnn", R},
      {"mlp.hidden", "[16]", "layer_tables", R},
      {"mlp.dropout", "0.1", "allreduce", H},
      {"mlp.dropout", "0.1", "cnn", R},
      {"cnn.channels", "[4]", "cnn", H},
      {"cnn.channels", "[4]", "allreduce", R},
      {"cnn.channels", "[4]", "layer_tables", R},
      {"cnn.hidden", "16", "cnn", H},
      {"cnn.hidden", "16", "allreduce", R},
      {"cnn.dropout", "0.1", "cnn", H},
      {"cnn.dropout", "0.1", "allreduce", R},

      // The optimizer and its schedule.
      {"optim.name", "\"adam\"", "allreduce", H},
      {"optim.lr", "0.01", "allreduce", H},
      {"optim.momentum", "0.5", "allreduce", H},
      {"optim.momentum", "0.5", "adam", R, "Adam's momentum is optim.beta1"},
      {"optim.nesterov", "true", "allreduce", H},
      {"optim.nesterov", "true", "adam", R},
      {"optim.weight_decay", "0.01", "allreduce", H},
      {"optim.weight_decay", "0.01", "adam", H},
      {"optim.beta1", "0.8", "adam", H},
      {"optim.beta1", "0.8", "allreduce", R},
      {"optim.beta2", "0.99", "adam", H},
      {"optim.beta2", "0.99", "allreduce", R},
      {"optim.eps", "1e-6", "adam", H},
      {"optim.eps", "1e-6", "allreduce", R},
      {"optim.decoupled", "true", "adam", H},
      {"optim.decoupled", "true", "allreduce", R},
      {"optim.clip_norm", "1.0", "allreduce", H},
      {"optim.clip_norm", "1.0", "bmuf", R, "local steps: no combined gradient"},
      {"optim.clip_norm", "1.0", "ps", R, "the servers combine"},
      {"optim.clip_norm", "1.0", "model_parallel", R, "slices update during backward"},
      {"lr.schedule", "\"cosine\"", "allreduce", H},
      {"lr.warmup_epochs", "1.0", "allreduce", H},
      {"lr.warmup_epochs", "1.0", "cosine_lr", H},
      {"lr.step_epochs", "1.0", "step_lr", H},
      {"lr.step_epochs", "1.0", "allreduce", R},
      {"lr.step_epochs", "1.0", "cosine_lr", R},
      {"lr.gamma", "0.5", "step_lr", H},
      {"lr.gamma", "0.5", "allreduce", R},
      {"lr.min", "0.001", "cosine_lr", H},
      {"lr.min", "0.001", "allreduce", R},
      {"lr.min", "0.001", "step_lr", R},
      {"loss_scale.mode", "\"dynamic\"", "allreduce", H},
      {"loss_scale.initial", "1024.0", "dynamic_scale", H},
      {"loss_scale.initial", "1024.0", "allreduce", R, "no scaling in fp32 by default"},
      {"loss_scale.growth_interval", "10", "dynamic_scale", H},
      {"loss_scale.growth_interval", "10", "allreduce", R},
      {"loss_scale.min", "2.0", "dynamic_scale", H},
      {"loss_scale.min", "2.0", "allreduce", R},
      {"loss_scale.max", "1e6", "dynamic_scale", H},
      {"loss_scale.max", "1e6", "allreduce", R},

      // The strategy.
      {"sync", "\"bmuf\"", "allreduce", H},
      {"sync", "\"ps\"", "allreduce", H},
      {"sync.bucket_kib", "64", "allreduce", H},
      {"sync.bucket_kib", "64", "one_worker", H},
      {"sync.bucket_kib", "64", "bmuf", H},
      {"sync.bucket_kib", "64", "ps", H},
      {"sync.bucket_kib", "64", "model_parallel", R, "no buckets: exchanges inside the layers"},
      {"sync.overlap", "true", "allreduce", H},
      {"sync.overlap", "false", "one_worker", H},
      {"sync.overlap", "false", "ps", H, "pushes during backward or after it"},
      {"sync.overlap", "true", "bmuf", R, "one exchange per block, after backward"},
      {"sync.overlap", "true", "model_parallel", R},
      {"sync.shard_optimizer", "false", "allreduce", H},
      {"sync.shard_optimizer", "false", "int8", H, "a codec does not shard: false holds"},
      {"sync.shard_optimizer", "false", "bmuf", R},
      {"sync.shard_optimizer", "false", "ps", R},
      {"sync.shard_optimizer", "false", "model_parallel", R},
      {"sync.momentum_correction", "true", "topk", H},
      {"sync.momentum_correction", "true", "allreduce", R, "fp32 sends gradients exactly"},
      {"sync.momentum_correction", "true", "int8", R},
      {"sync.momentum_masking", "true", "topk", H},
      {"sync.momentum_masking", "true", "allreduce", R},
      {"bmuf.tau", "2", "bmuf", H},
      {"bmuf.tau", "2", "allreduce", R},
      {"bmuf.tau", "2", "ps", R},
      {"bmuf.tau", "2", "model_parallel", R},
      {"bmuf.eta", "0.5", "bmuf", H},
      {"bmuf.eta", "0.5", "allreduce", R},
      {"bmuf.zeta", "0.5", "bmuf", H},
      {"bmuf.zeta", "0.5", "allreduce", R},
      {"bmuf.nesterov", "false", "bmuf", H},
      {"bmuf.nesterov", "false", "allreduce", R},
      {"bmuf.reset_momentum", "true", "bmuf", H},
      {"bmuf.reset_momentum", "true", "ps", R},
      {"ps.servers", "2", "ps", H},
      {"ps.servers", "2", "allreduce", R},
      {"ps.servers", "2", "bmuf", R},
      {"ps.staleness", "1", "ps", H},
      {"ps.staleness", "1", "allreduce", R},
      {"ps.placement", "\"ranks\"", "ps", H},
      {"ps.placement", "\"ranks\"", "allreduce", R},
      {"ps.exact_delay", "true", "ps_stale", H},
      {"ps.exact_delay", "true", "ps", R, "synchronous: no stale version to choose"},
      {"ps.exact_delay", "true", "allreduce", R},
      {"ps.lookahead", "false", "ps_stale", H},
      {"ps.lookahead", "false", "ps", R},
      {"ps.stale_lr", "\"divide\"", "ps_stale", H},
      {"ps.stale_lr", "\"divide\"", "ps", R},
      {"ps.stale_lr", "\"divide\"", "model_parallel", R},
      {"parallel", "\"model\"", "allreduce", H},
      {"parallel", "\"model\"", "one_worker", H},
      {"parallel.mode", "\"model\"", "allreduce", H},
      {"parallel.activations", "\"int8\"", "model_parallel", H},
      {"parallel.activations", "\"int8\"", "allreduce", R, "data parallelism exchanges none"},
      {"parallel.linear", "[\"column\", \"row\", \"replicated\"]", "model_parallel", H},
      {"parallel.linear", "[\"column\", \"row\", \"replicated\"]", "allreduce", R},
      {"comm.algorithm", "\"ring\"", "allreduce", H},
      {"comm.algorithm", "\"ring\"", "one_worker", H},
      {"comm.algorithm", "\"ring\"", "ps", H, "the evaluation's sums are allreduces"},
      {"comm.ranks_per_node", "1", "allreduce", H},

      // The codec.
      {"codec", "\"int8\"", "allreduce", H},
      {"codec", "\"int8\"", "one_worker", H},
      {"codec", "\"int8\"", "bmuf", H},
      {"codec", "\"int8\"", "model_parallel", H, "the data-parallel layers' gradients"},
      {"codec", "\"int8\"", "ps", R, "the parameter server sends fp32"},
      {"codec.name", "\"int8\"", "allreduce", H},
      {"codec.error_feedback", "false", "int8", H},
      {"codec.error_feedback", "false", "allreduce", R, "fp32 leaves no residual"},
      {"codec.error_feedback", "false", "ps", R},
      {"codec.residual", "\"fp32\"", "fp16", H},
      {"codec.residual", "\"bf16\"", "allreduce", R},
      {"codec.residual", "\"bf16\"", "int8", R},
      {"codec.int8_block", "256", "int8", H},
      {"codec.int8_block", "256", "allreduce", R},
      {"codec.int8_block", "256", "topk", R},
      {"codec.int8_block", "256", "ps", R},
      {"codec.onebit_column", "64", "onebit", H},
      {"codec.onebit_column", "64", "int8", R},
      {"codec.topk_fraction", "0.1", "topk", H},
      {"codec.topk_fraction", "0.1", "int8", R},
      {"codec.topk_fraction", "0.1", "allreduce", R},
      {"codec.powersgd_rank", "2", "powersgd", H},
      {"codec.powersgd_rank", "2", "int8", R},
      {"codec.powersgd_cols", "64", "powersgd", H},
      {"codec.powersgd_cols", "64", "topk", R},
      {"codec.seed", "7", "powersgd", H},
      {"codec.seed", "7", "int8", R},
      {"codec.warmup_steps", "1", "int8", H},
      {"codec.warmup_steps", "1", "allreduce", R},
      {"codec.warmup_steps", "1", "bmuf", R},
      {"codec.aggregation", "\"gather\"", "int8", H},
      {"codec.aggregation", "\"gather\"", "allreduce", R},
      {"codec.aggregation", "\"gather\"", "topk", R, "top-k gathers: one way to sum"},
      {"codec.min_bucket_kib", "1", "int8", H},
      {"codec.min_bucket_kib", "1", "allreduce", R},
      {"codec.min_bucket_kib", "1", "ps", R},

      // The timeline.
      {"trace.file", "\"{out}/trace.json\"", "allreduce", H},
      {"trace.steps", "2", "trace", H},
      {"trace.steps", "2", "allreduce", R, "no trace.file: nothing recorded"},
      {"trace.every", "2", "trace", H},
      {"trace.every", "2", "allreduce", R},
      {"trace.max_events", "1000", "trace", H},
      {"trace.max_events", "1000", "allreduce", R},

      // Checkpoints and the NaN policy.
      {"train.checkpoint_every", "1", "output", H},
      {"train.checkpoint_every", "1", "allreduce", R, "output.dir \"\": nowhere to write"},
      {"train.checkpoint_minutes", "1.0", "output", H},
      {"train.checkpoint_minutes", "1.0", "allreduce", R},
      {"train.checkpoint_keep", "1", "output", H, "prunes the checkpoints a stop writes too"},
      {"train.checkpoint_keep", "1", "allreduce", R},
      {"train.resume", "\"{run}\"", "resume", H},
      {"train.nan_policy", "\"skip\"", "allreduce", H},
      {"train.nan_lr_factor", "0.25", "nan_skip", H},
      {"train.nan_lr_factor", "0.25", "allreduce", R, "abort: no step is skipped"},
      {"train.nan_max_skips", "2", "nan_skip", H},
      {"train.nan_max_skips", "2", "allreduce", R},
      {"train.nan_check_grads", "false", "allreduce", H},

      // The data.
      {"data.workers", "2", "allreduce", H},
      {"data.workers", "2", "no_prefetch", R, "no batch is read ahead"},
      {"data.shuffle_window", "16", "allreduce", H},
      {"data.shuffle_window", "16", "no_shuffle", R},
      {"data.throttle_mbps", "1000.0", "allreduce", H},
      {"data.train_shards", "\"/nowhere\"", "allreduce", R, "the samples are given in memory"},
      {"data.context", "4", "allreduce", R, "not a token stream"},
      {"data.test_shards", "\"/nowhere\"", "allreduce", R},
      {"data.validation", "0.25", "validation", H},
      {"data.validation", "0.25", "allreduce", G,
       "with eval = false the split is held out and never evaluated; refusing it is a change "
       "of behaviour for sweeps that turn eval off"},
      {"data.max_classes", "3", "allreduce", H},
      {"data.augment.crop_padding", "1", "allreduce", H},
      {"data.augment.crop_padding", "1", "flat_data", R, "samples that are not images"},
      {"data.augment.hflip", "true", "allreduce", H},
      {"data.augment.hflip", "true", "flat_data", R},

      // codec/sync = "auto". Its keys weigh the choice; without an auto key they do nothing.
      {"auto.max_accuracy_delta", "1.0", "auto", H},
      {"auto.max_accuracy_delta", "1.0", "allreduce", G,
       "config.toml of an auto run holds its choice and these keys, and runs again as it is"},
      // The budget of token runs; on others it still weighs the calibration's token cases.
      {"auto.max_bits_delta", "0.1", "auto", H},
      {"auto.max_bits_delta", "0.1", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.lossy", "false", "auto", H},
      {"auto.lossy", "false", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.calibration", "\"/nowhere.jsonl\"", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.machine", "\"elsewhere\"", "allreduce", H, "written by loom: where auto chose"},
      {"auto.calibration_mismatch", "\"measure\"", "auto", G,
       "applies with auto.calibration (a file of this machine's rates) only"},
      {"auto.calibration_mismatch", "\"measure\"", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.check_after", "1", "auto", H},
      {"auto.check_after", "1", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.check_steps", "0", "auto", H},
      {"auto.check_steps", "0", "allreduce", G, "as auto.max_accuracy_delta"},
      {"auto.revised", "\"no\"", "allreduce", H, "written by loom: what the check switched"},
      {"auto.test_probe_link_factor", "2.0", "auto", H},
      {"auto.test_probe_link_factor", "2.0", "allreduce", G, "a test hook"},
      {"auto.test_window_comm_s", "0.001", "auto", H},
      {"auto.test_window_comm_s", "0.001", "allreduce", G, "a test hook"},
  };
  return r;
}

// n samples around one of 3 centres, their class the centre's (or, for regression, a target
// that is a function of the features).
data::Dataset samples(Data kind, int n) {
  data::Dataset d;
  d.name = "walk";
  d.count = n;
  d.sample_shape = kind == Data::kImages ? std::vector<int64_t>{1, 8, 8} : std::vector<int64_t>{6};
  const int64_t numel = d.sample_numel();
  Rng rng(3, 0, RngPurpose::kTest);
  d.num_classes = kind == Data::kRegression ? 0 : 3;
  for (int i = 0; i < n; ++i) {
    const int32_t c = i % 3;
    d.labels.push_back(kind == Data::kRegression ? 0 : c);
    for (int64_t k = 0; k < numel; ++k)
      d.features.push_back(float((k % 3 == c ? 1.5 : 0.0) + rng.uniform() - 0.5));
    if (kind == Data::kRegression) d.targets.push_back(float(c));
  }
  if (kind == Data::kRegression) d.target_numel = 1;
  return d;
}

// `value` (TOML) under `key`, remembered as set at `where`; an array as `--set` sets it.
void set_value(Config& cfg, const std::string& key, const std::string& value,
               const std::string& where) {
  const Config one = Config::from_string("v = " + value, where);
  const ConfigValue& v = one.values().at("v");
  if (v.is_array)
    cfg.set_override(key + "=" + value);
  else
    cfg.set(key, v.value, where);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

class Walk {
 public:
  // A row's run: nullopt when it trained, else the ConfigError's message. Other errors fail.
  std::optional<std::string> run(const Row& row, const std::string& where) {
    const Combination& c = combinations().at(row.combination);
    Config cfg = c.toml.empty() ? Config() : Config::from_string(c.toml, "combination.toml");
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"workers", "2"},
                                                          {"batch", "4"},
                                                          {"max_steps", "1"},
                                                          {"epochs", "1"},
                                                          {"eval", "false"},
                                                          {"progress", "\"none\""},
                                                          {"log.level", "\"error\""},
                                                          {"output.dir", "\"\""}})
      set_value(cfg, key, value, "base");
    for (const std::string& s : c.sets) {
      const size_t eq = s.find('=');
      std::string value = substituted(s.substr(eq + 1));
      // Bare words as `--set` takes them: quoted here for TOML.
      if (value.find_first_of("[\"") != 0 && value != "true" && value != "false" &&
          value.find_first_not_of("0123456789.e-") != std::string::npos)
        value = toml_quoted(value);
      set_value(cfg, s.substr(0, eq), value, std::string("combination ") + row.combination);
    }
    if (*row.value) set_value(cfg, row.key, substituted(row.value), where);
    TrainOptions o;
    o.train_data = std::make_shared<data::DatasetSource>(data_for(c.data));
    try {
      run_training(plan::read_run_plan(cfg), o);
      return std::nullopt;
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  }

 private:
  std::string substituted(const std::string& value) {
    std::string v = value;
    if (v.find("{out}") != std::string::npos)
      v = replaced(v, "{out}", dir_.file("out" + std::to_string(++outputs_)));
    if (v.find("{run}") != std::string::npos) v = replaced(v, "{run}", checkpointed_run());
    return v;
  }

  // A fresh run of the base combination that wrote a checkpoint after its one step, for a
  // row to resume; one per row that asks (a resume writes into the run it resumes).
  std::string checkpointed_run() {
    if (!run_dir_.empty()) return run_dir_;
    run_dir_ = dir_.file("checkpointed");
    Config cfg;
    for (const char* s : {"workers=2", "batch=4", "max_steps=1", "epochs=1", "eval=false",
                          "progress=none", "log.level=error", "train.checkpoint_every=1"})
      cfg.set_override(s);
    cfg.set("output.dir", run_dir_);
    TrainOptions o;
    o.train_data = std::make_shared<data::DatasetSource>(data_for(Data::kImages));
    run_training(plan::read_run_plan(cfg), o);
    return run_dir_;
  }

  const data::Dataset& data_for(Data kind) {
    auto it = data_.find(kind);
    if (it == data_.end()) it = data_.emplace(kind, samples(kind, 48)).first;
    return it->second;
  }

  TempDir dir_;
  int outputs_ = 0;
  std::string run_dir_;
  std::map<Data, data::Dataset> data_;
};

// Whether `message` names `key` as a word of its own: 'key', "key = ...", "key: ...".
bool names_key(const std::string& message, const std::string& key) {
  for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1)) {
    const char before = at == 0 ? ' ' : message[at - 1];
    const char after = at + key.size() < message.size() ? message[at + key.size()] : ' ';
    if (std::string(" '(").find(before) != std::string::npos &&
        std::string(" '=:,)").find(after) != std::string::npos)
      return true;
  }
  return false;
}

std::string describe(const Row& row) {
  return fmt::format("{} = {} in \"{}\"", row.key, *row.value ? row.value : "(set)",
                     row.combination);
}

// The declared keys are the table's: a key added without saying where it applies fails here,
// and so does a row for a key no longer declared.
TEST(IgnoredKeys, EveryDeclaredKeyHasRows) {
  std::set<std::string> declared, in_table;
  for (const ConfigKeySpec& k : plan::train_config_keys()) declared.insert(k.key);
  for (const Row& row : rows()) {
    in_table.insert(row.key);
    EXPECT_TRUE(declared.count(row.key)) << describe(row) << ": not a key loom train declares";
    EXPECT_TRUE(combinations().count(row.combination)) << describe(row);
    if (row.expect == Expect::kKnownGap) {
      EXPECT_STRNE(row.note, "") << describe(row) << ": a known gap says why";
    }
  }
  for (const std::string& key : declared)
    EXPECT_TRUE(in_table.count(key)) << key << ": declared by loom train, but the table does "
                                     << "not say where it applies";
}

// Every row, run: honoured values train, the others are refused naming the key and where.
TEST(IgnoredKeys, EachValueIsHonouredOrRefusedByName) {
  Walk walk;
  int n = 0;
  for (const Row& row : rows()) {
    const std::string where = fmt::format("walk.toml:{}", ++n);
    SCOPED_TRACE(describe(row));
    std::optional<std::string> refused;
    try {
      refused = walk.run(row, where);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a ConfigError: " << e.what();
      continue;
    }
    switch (row.expect) {
      case Expect::kHonoured:
        EXPECT_FALSE(refused) << "applies here, but was refused: " << *refused;
        break;
      case Expect::kKnownGap:
        EXPECT_FALSE(refused) << "now refused (" << *refused
                              << "): make the row kRefused and drop its note";
        break;
      case Expect::kRefused: {
        if (!refused) {
          ADD_FAILURE() << "does not apply here, yet the run took it without a word";
          break;
        }
        EXPECT_TRUE(names_key(*refused, row.key))
            << "the refusal does not name the key: " << *refused;
        // An array is set as --set sets it, and remembered so.
        const std::string set_at = std::string(row.value).rfind('[', 0) == 0 ? "--set" : where;
        EXPECT_NE(refused->find(set_at), std::string::npos)
            << "the refusal does not say where the key was set (" << set_at << "): " << *refused;
        break;
      }
    }
  }
}

}  // namespace
}  // namespace loom::train
