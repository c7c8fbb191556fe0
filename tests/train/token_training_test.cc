// Training on token windows through the whole data path: text -> `convert --text` shards ->
// windows -> loader -> per-position labels through Model::loss. A tiny model learns a repeated
// pattern; the figures come in nats and in bits per character (bits = nats / ln 2) in
// metrics.jsonl and summary.json; a resumed token run reaches the same bits; a checkpoint of
// another vocabulary, a model that does not predict every position, a context longer than the
// data and a test stream of another vocabulary are refused.
//
// The run_training tests use windows of one token (data.context = 1), which the layers of
// every build can model; the sequence layers (Embedding, attention) give windows of more. The
// Model-level test below trains windows of 6 tokens with a lookup layer of its own.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/data/formats/token_shard.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/token_windows.h"
#include "loom/nn/graph/model.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/checkpoint.h"
#include "loom/train/evaluation.h"
#include "loom/train/trained_model.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

// `n` characters of `pattern` repeated, as a character token shard.
std::string pattern_shard(const TempDir& dir, const std::string& name, const std::string& pattern,
                          int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text.push_back(pattern[size_t(i) % pattern.size()]);
  const std::string txt = dir.file(name + ".txt");
  std::ofstream(txt, std::ios::binary) << text;
  const std::string shard = dir.file(name + ".shard");
  data::convert_text(txt, shard, data::TextVocab::kChars);
  return shard;
}

// Next character from the current one's id: a two-layer MLP over one float per window, with
// `classes` outputs.
std::string bigram_graph(int classes) {
  return fmt::format(R"(
[[layer]]
type = "linear"
out = 32
[[layer]]
type = "relu"
[[layer]]
type = "linear"
out = {}
)",
                     classes);
}

// with_context false: no data.context key.
Config token_run(const TempDir& dir, int classes = 4, bool with_context = true) {
  Config cfg = Config::from_string(bigram_graph(classes), "bigram.toml");
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(16));
  cfg.set("epochs", int64_t(3));
  cfg.set("eval", true);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("optim.name", std::string("adam"));
  cfg.set("optim.lr", 0.01);
  cfg.set("data.train_shards", pattern_shard(dir, "train", "abcd", 4000));
  cfg.set("data.test_shards", pattern_shard(dir, "test", "dcba", 400));
  if (with_context) cfg.set("data.context", int64_t(1));
  cfg.set("data.validation", 0.1);
  cfg.set("output.dir", dir.file("run"));
  return cfg;
}

std::vector<nlohmann::json> lines_of(const fs::path& p, const char* kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["kind"] == kind) out.push_back(j);
    }
  return out;
}

TEST(TokenTraining, LearnsARepeatedPatternAndReportsBitsPerCharacter) {
  TempDir dir;
  const Config cfg = token_run(dir);
  const TrainResult r = run_training(plan::read_run_plan(cfg));
  // 4000 tokens, the last 400 held out: 399 validation windows (each needs the next token).
  EXPECT_EQ(r.val_samples, 399);
  ASSERT_EQ(r.epochs.size(), 3u);
  // "abcd" repeated: the next character is a function of this one; learned, so the loss is far
  // below chance (ln 4 nats) and every validation token is predicted.
  EXPECT_LT(r.val_loss, 0.05);
  EXPECT_EQ(r.val_acc, 1.0);
  EXPECT_LT(r.epochs.back().train_loss, 0.2 * r.epochs.front().train_loss);
  // The test stream "dcba" runs the other way: every next character is another one.
  EXPECT_LT(r.test_acc, 0.01);
  EXPECT_GT(r.test_loss, std::log(4.0));

  std::ifstream in(fs::path(dir.file("run")) / "summary.json");
  const nlohmann::json s = nlohmann::json::parse(in);
  EXPECT_EQ(s["token_unit"], "character");
  EXPECT_EQ(s["vocab"]["kind"], "chars");
  EXPECT_EQ(s["vocab"]["size"], 4);
  EXPECT_EQ(s["context"], 1);
  EXPECT_NEAR(s["val_bits_per_character"].get<double>(), r.val_loss / std::log(2.0),
              1e-12 * (1 + r.val_loss));
  EXPECT_NEAR(s["test_bits_per_character"].get<double>(), r.test_loss / std::log(2.0),
              1e-12 * r.test_loss);
  EXPECT_GT(s["tokens_per_s"].get<double>(), 0);
  // `loom eval` of the run: its test stream as windows, the same per-token figures.
  TrainedModel m = load_trained_model(dir.file("run"), cpu_backend());
  std::string from;
  const data::Dataset set = load_eval_set(m, "", &from);
  EXPECT_EQ(set.labels_per_sample, 1);
  EXPECT_EQ(set.token_unit, "character");
  const EvalResult e = evaluate_model(*m.model, set);
  EXPECT_EQ(e.tokens, 399);
  EXPECT_NEAR(e.loss, r.test_loss, 1e-6 * r.test_loss);
  // The run evaluated on its 2 ranks (200 and 199 positions), evaluate_model in one forward of
  // 399: other GEMM shapes, so the logits agree to rounding and only a near tie's argmax may
  // differ (docs/determinism.md).
  EXPECT_NEAR(e.accuracy, r.test_acc, 2.0 / 399);
  EXPECT_NEAR(eval_json(e)["bits_per_character"].get<double>(), e.loss / std::log(2.0), 1e-12);
  const auto epochs = lines_of(fs::path(dir.file("run")) / "metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 3u);
  for (size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(epochs[i]["token_unit"], "character");
    EXPECT_NEAR(epochs[i]["val_bits_per_character"].get<double>(),
                r.epochs[i].val_loss / std::log(2.0), 1e-12);
    EXPECT_NEAR(epochs[i]["train_bits_per_character"].get<double>(),
                r.epochs[i].train_loss / std::log(2.0), 1e-12);
    EXPECT_GT(epochs[i]["tokens_per_s"].get<double>(), 0);
  }
}

// Mid-epoch checkpoints of a token run resume to the same bits; a checkpoint of another
// vocabulary (same size, other characters) is refused by name.
TEST(TokenTraining, ResumesExactlyAndRefusesAnotherVocabulary) {
  TempDir dir;
  Config cfg = token_run(dir);
  cfg.set("eval", false);
  cfg.set("epochs", int64_t(2));
  cfg.set("train.checkpoint_every", int64_t(40));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_GT(full.steps, 120);  // 112 steps per epoch: 40 and 120 fall inside epochs 1 and 2
  const fs::path ck = fs::path(dir.file("run")) / "checkpoints";
  for (int step : {40, 120}) {
    Config again = cfg;
    again.set("train.resume", (ck / checkpoint_name(step)).string());
    EXPECT_EQ(run_training(plan::read_run_plan(again)).final_params, full.final_params) << step;
  }
  Config other = cfg;
  other.set("data.train_shards", pattern_shard(dir, "other", "wxyz", 4000));
  other.set("train.resume", (ck / checkpoint_name(40)).string());
  try {
    run_training(plan::read_run_plan(other));
    ADD_FAILURE() << "a checkpoint of another vocabulary was resumed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

std::string error_of(const Config& cfg) {
  try {
    run_training(plan::read_run_plan(cfg));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenTraining, RefusesWhatDoesNotFit) {
  TempDir dir;
  const Config base = token_run(dir);
  // Windows of 3 positions; the model predicts one.
  Config c = base;
  c.set("data.context", int64_t(3));
  EXPECT_NE(error_of(c).find("need one prediction per position"), std::string::npos) << error_of(c);
  // Five outputs against a vocabulary of four.
  const std::string five = error_of(token_run(dir, 5));
  EXPECT_NE(five.find("4 classes"), std::string::npos) << five;
  // A context longer than the data.
  c = base;
  c.set("data.context", int64_t(5000));
  EXPECT_NE(error_of(c).find("data.context = 5000"), std::string::npos) << error_of(c);
  // A token stream without data.context; data.context without a token stream.
  c = token_run(dir, 4, false);
  EXPECT_NE(error_of(c).find("set data.context"), std::string::npos) << error_of(c);
  c = testing::tiny_run(1, 32, 2);
  c.set("data.context", int64_t(4));
  EXPECT_NE(error_of(c).find("data.context cuts a token stream"), std::string::npos) << error_of(c);
  // A test stream of another vocabulary.
  c = base;
  c.set("data.test_shards", pattern_shard(dir, "wxyz", "wxyz", 400));
  const std::string vocab = error_of(c);
  EXPECT_NE(vocab.find("wxyz.shard"), std::string::npos) << vocab;
  EXPECT_NE(vocab.find("vocabulary"), std::string::npos) << vocab;
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

// A two-block pre-norm transformer of width 24 (the zoo's gpt-char layout, small) over windows
// of `context` tokens of a vocabulary of `vocab`.
std::string tiny_gpt_graph(int vocab, int context) {
  std::string g = fmt::format(R"(
[[layer]]
type = "embedding"
name = "tok"
vocab = {0}
dim = 24
[[layer]]
type = "position_embedding"
name = "pos"
max_len = {1}
dim = 24
)",
                              vocab, context);
  std::string prev = "pos";
  for (int b = 0; b < 2; ++b) {
    g += fmt::format(R"(
[[layer]]
type = "layernorm"
name = "b{0}_ln1"
input = "{1}"
[[layer]]
type = "attention"
name = "b{0}_attn"
dim = 24
heads = 2
[[layer]]
type = "add"
name = "b{0}_res1"
inputs = ["{1}", "b{0}_attn"]
[[layer]]
type = "layernorm"
name = "b{0}_ln2"
[[layer]]
type = "linear"
name = "b{0}_fc"
out = 48
[[layer]]
type = "gelu"
name = "b{0}_gelu"
[[layer]]
type = "linear"
name = "b{0}_proj"
out = 24
[[layer]]
type = "add"
name = "b{0}_res2"
inputs = ["b{0}_res1", "b{0}_proj"]
)",
                     b, prev);
    prev = fmt::format("b{}_res2", b);
  }
  g += fmt::format(R"(
[[layer]]
type = "layernorm"
name = "ln_f"
[[layer]]
type = "linear"
name = "head"
out = {}
)",
                   vocab);
  return g;
}

// A period of 29 characters over 8 letters, each letter 3 or 4 times, so neither a letter's
// frequency nor the letter before it tells the next one (each letter is followed by two to four
// others). Only the phase of the period, which the window's earlier tokens show, predicts it.
constexpr const char* kPeriod = "abcdefghaceghbdfacfhbegadhcgf";

// Entropies of the repeated period in nats: of a letter, and of a letter given the one before.
double unigram_entropy_nats(const std::string& period) {
  std::map<char, double> count;
  for (char c : period) count[c] += 1;
  const double n = double(period.size());
  double h = 0;
  for (const auto& [c, k] : count) h -= k / n * std::log(k / n);
  return h;
}
double bigram_entropy_nats(const std::string& period) {
  std::map<char, double> first;
  std::map<std::pair<char, char>, double> pair;
  for (size_t i = 0; i < period.size(); ++i) {
    first[period[i]] += 1;
    pair[{period[i], period[(i + 1) % period.size()]}] += 1;
  }
  const double n = double(period.size());
  double h = 0;
  for (const auto& [ab, k] : pair) h -= k / n * std::log(k / first[ab.first]);
  return h;
}

Config tiny_gpt_run(const TempDir& dir) {
  Config cfg = Config::from_string(tiny_gpt_graph(8, 48), "tiny_gpt.toml");
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(8));
  cfg.set("epochs", int64_t(12));
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("optim.name", std::string("adam"));
  cfg.set("optim.lr", 0.01);
  cfg.set("lr.schedule", std::string("cosine"));
  cfg.set("data.train_shards", pattern_shard(dir, "period", kPeriod, 12000));
  cfg.set("data.context", int64_t(48));
  cfg.set("data.validation", 0.1);
  cfg.set("output.dir", dir.file("run"));
  return cfg;
}

// A transformer trained data-parallel over windows of 48 tokens learns what only the context
// tells: its validation loss ends far below the letters' unigram entropy (what a model blind to
// the context could reach) and below the entropy of a letter given the one before it.
TEST(TokenTraining, TransformerOverLongWindowsLearnsFromTheContext) {
  TempDir dir;
  const TrainResult r = run_training(plan::read_run_plan(tiny_gpt_run(dir)));
  const double unigram = unigram_entropy_nats(kPeriod);
  ASSERT_GT(unigram, std::log(7.0));  // 8 letters, nearly uniform
  const double bigram = bigram_entropy_nats(kPeriod);
  ASSERT_GT(bigram, 0.8);
  EXPECT_LT(r.val_loss, 0.25 * unigram) << "unigram entropy " << unigram << " nats";
  EXPECT_LT(r.val_loss, 0.5 * bigram) << "bigram entropy " << bigram << " nats";
  EXPECT_GT(r.val_acc, 0.9);
}

// The same run resumed from mid-run checkpoints ends with the uninterrupted run's parameters
// bit for bit: the window offsets, the order and the optimizer state all come back.
TEST(TokenTraining, TransformerRunResumesExactly) {
  TempDir dir;
  Config cfg = tiny_gpt_run(dir);
  cfg.set("epochs", int64_t(3));
  cfg.set("eval", false);
  cfg.set("train.checkpoint_every", int64_t(10));
  cfg.set("train.checkpoint_keep", int64_t(10));
  const TrainResult full = run_training(plan::read_run_plan(cfg));
  ASSERT_GT(full.steps, 30);
  const fs::path ck = fs::path(dir.file("run")) / "checkpoints";
  for (int step : {10, 30}) {
    Config again = cfg;
    again.set("train.resume", (ck / checkpoint_name(step)).string());
    const TrainResult resumed = run_training(plan::read_run_plan(again));
    EXPECT_EQ(resumed.final_params, full.final_params) << step;
    EXPECT_EQ(resumed.steps, full.steps) << step;
  }
}

// A lookup table per position, [context] ids -> [context, vocab] logits: the next-token table
// of a bigram model, written here so this test needs no layer beyond the Model's contract.
class PositionLookup final : public nn::Layer {
 public:
  explicit PositionLookup(int64_t vocab) : v_(vocab) {}
  std::string kind() const override { return "PositionLookup"; }
  nn::Shape build(const nn::Shape& input) override {
    positions_ = input.at(0);
    return {positions_, v_};
  }
  int64_t num_params() const override { return v_ * v_; }
  void bind(float* params, float* grads) override {
    w_ = params;
    dw_ = grads;
  }
  void forward(const nn::Context&, const float* x, float* y, int64_t batch) override {
    for (int64_t r = 0; r < batch * positions_; ++r)
      std::copy_n(w_ + int64_t(x[r]) * v_, v_, y + r * v_);
  }
  void backward(const nn::Context&, const float* x, const float*, const float* dy, float*,
                int64_t batch) override {
    std::fill_n(dw_, v_ * v_, 0.0f);
    for (int64_t r = 0; r < batch * positions_; ++r)
      for (int64_t k = 0; k < v_; ++k) dw_[int64_t(x[r]) * v_ + k] += dy[r * v_ + k];
  }

 private:
  int64_t v_, positions_ = 0;
  float *w_ = nullptr, *dw_ = nullptr;
};

// Windows of 6 tokens through the loader: each batch's 6 labels per sample reach Model::loss
// as one label per output position, and the model learns the pattern at every position.
TEST(TokenTraining, PerPositionLabelsTrainAModelOfWindows) {
  TempDir dir;
  auto shard = std::make_shared<const data::TokenShard>(pattern_shard(dir, "p", "abcdefg", 3000));
  data::WindowOptions wo;
  wo.context = 6;
  wo.random_offset = true;
  wo.seed = 2;
  auto src = std::make_shared<const data::TokenWindowSource>(shard, wo);
  std::vector<std::unique_ptr<nn::Layer>> layers;
  layers.push_back(std::make_unique<PositionLookup>(src->num_classes()));
  nn::Model model(cpu_backend(), {6}, src->num_classes(), std::move(layers));
  ASSERT_EQ(model.output_positions(), 6);
  model.init_params(1);
  std::fill_n(model.params(), model.num_params(), 0.0f);
  data::LoaderOptions lo;
  lo.global_batch = 10;
  lo.seed = 2;
  data::Loader loader(src, lo);
  double first_loss = -1, last_loss = 0;
  int64_t last_correct = 0, last_labels = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    data::Batch b;
    while (loader.next(b)) {
      ASSERT_EQ(b.labels_per_sample, 6);
      nn::StepInfo info;
      model.forward(b.x, b.size, info);
      const int64_t labels = b.size * b.labels_per_sample;
      const nn::LossResult r = model.loss(b.y, 1.0f / float(labels));
      if (first_loss < 0) first_loss = r.loss_sum / double(labels);
      last_loss = r.loss_sum / double(labels);
      last_correct = r.correct;
      last_labels = labels;
      model.backward();
      for (int64_t i = 0; i < model.num_params(); ++i) model.params()[i] -= 5.0f * model.grads()[i];
    }
  }
  // Zero logits at first: ln 7 nats per token. The pattern's next character is certain at
  // every position, and every one of the last batch's 60 labels is predicted.
  EXPECT_NEAR(first_loss, std::log(7.0), 1e-5);
  EXPECT_LT(last_loss, 0.05);
  EXPECT_EQ(last_correct, last_labels);
}

}  // namespace
}  // namespace loom::train
