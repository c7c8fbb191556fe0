// A run on a token stream: data.train_shards is a token shard, cut into windows of data.context
// tokens, and the vocabulary names the unit of the bits in every output.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "loom/data/formats/token_shard.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/model.h"
#include "loom/train/trainer.h"

namespace loom::train {

// A run on a token stream (data.train_shards is a token shard, cut into windows of
// data.context tokens): the vocabulary names the unit of the bits in every output.
struct TokenRun {
  bool enabled = false;
  int64_t context = 0;
  std::shared_ptr<const data::TokenShard> shard;  // the training stream
  data::Vocabulary vocab;
  std::string unit() const { return data::vocab_unit(vocab.kind); }
  // "val_bits_per_byte", "test_bits_per_character", ...
  std::string bits_key(const char* prefix) const {
    return fmt::format("{}_bits_per_{}", prefix, unit());
  }
};
inline constexpr double kLn2 = 0.6931471805599453;  // nats per bit

// The windows of a token shard for evaluation (offset 0), in memory. InputError naming the file
// when its vocabulary is not the training stream's.
data::Dataset token_eval_set(const TokenRun& t, const std::string& path, const char* role);

// data.train_shards a token stream: a token run, with data.context. ConfigError for
// data.context without a token stream or a token stream without it.
TokenRun open_token_run(const data::PipelineConfig& pipeline);

// The model predicts one token per position of a window: its output must be [context, vocab].
void check_model_fits_windows(const data::PipelineConfig& pipeline, const nn::Model& m,
                              const TokenRun& t);

// summary.json of a token run: the vocabulary, the rate in tokens/s, and every loss (nats per
// token) as bits per byte, character or token, named by the unit.
void add_token_summary(nlohmann::json& j, const TrainResult& r, const TokenRun& t);

}  // namespace loom::train
