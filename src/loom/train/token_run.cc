#include "loom/train/token_run.h"

#include <fmt/format.h>

#include "loom/core/error.h"
#include "loom/data/sources/token_windows.h"

namespace loom::train {

// The windows of a token shard for evaluation (offset 0), in memory. InputError naming the file
// when its vocabulary is not the training stream's.
data::Dataset token_eval_set(const TokenRun& t, const std::string& path, const char* role) {
  auto shard = std::make_shared<const data::TokenShard>(path);
  if (shard->vocabulary().fingerprint() != t.vocab.fingerprint())
    throw InputError(fmt::format(
        "{}: the {} stream's vocabulary, {}, is not the training stream's, {} ({}): convert "
        "both with the same --vocab from text with the same characters",
        path, role, shard->vocabulary().describe(), t.vocab.describe(), t.shard->path()));
  data::WindowOptions wo;
  wo.context = t.context;
  return data::materialise(data::TokenWindowSource(shard, wo), path);
}

// data.train_shards a token stream: a token run, with data.context. ConfigError for
// data.context without a token stream or a token stream without it.
TokenRun open_token_run(const data::PipelineConfig& pipeline) {
  TokenRun t;
  t.enabled = !pipeline.train_shards.empty() && data::is_token_shard(pipeline.train_shards);
  if (!t.enabled) {
    if (pipeline.context)
      throw ConfigError(fmt::format(
          "{}: data.context cuts a token stream into windows; data.train_shards is {} (convert "
          "text with `loom data convert --text FILE DST`)",
          pipeline.context_where,
          pipeline.train_shards.empty()
              ? std::string("not set")
              : fmt::format("\"{}\", not a token stream", pipeline.train_shards)));
    return t;
  }
  if (!pipeline.context)
    throw ConfigError(fmt::format(
        "{}: data.train_shards \"{}\" is a token stream: set data.context, the tokens per "
        "window",
        pipeline.train_shards_where, pipeline.train_shards));
  t.context = *pipeline.context;
  t.shard = std::make_shared<const data::TokenShard>(pipeline.train_shards);
  t.vocab = t.shard->vocabulary();
  return t;
}

// The model predicts one token per position of a window: its output must be [context, vocab].
void check_model_fits_windows(const data::PipelineConfig& pipeline, const nn::Model& m,
                              const TokenRun& t) {
  if (m.output_positions() != t.context)
    throw ConfigError(fmt::format(
        "{}: the model's output has {} position(s) of {} classes; windows of data.context = {} "
        "need one prediction per position ([{}, {}])",
        pipeline.context_where, m.output_positions(), m.num_classes(), t.context, t.context,
        t.vocab.size));
}

// summary.json of a token run: the vocabulary, the rate in tokens/s, and every loss (nats per
// token) as bits per byte, character or token, named by the unit.
void add_token_summary(nlohmann::json& j, const TrainResult& r, const TokenRun& t) {
  const auto bits = [](double v) { return v >= 0 ? nlohmann::json(v / kLn2) : nullptr; };
  j["token_unit"] = t.unit();
  j["vocab"] = {{"kind", data::vocab_kind_name(t.vocab.kind)},
                {"size", t.vocab.size},
                {"fingerprint", fmt::format("{:016x}", t.vocab.fingerprint())}};
  j["context"] = t.context;
  j["tokens_per_s"] = r.samples_per_s * double(t.context);
  j[t.bits_key("train")] = bits(r.train_loss);
  j[t.bits_key("val")] = bits(r.val_loss);
  j[t.bits_key("test")] = bits(r.test_loss);
}

}  // namespace loom::train
