#include "loom/data/loader/pipeline_config.h"

#include <fmt/format.h>

#include "loom/data/loader/throttle.h"

namespace loom::data {

std::vector<ConfigKeySpec> data_config_keys() {
  return {
      {"data.workers", ConfigType::kInt, "1", "threads that gather/decode/augment batches ahead"},
      {"data.shuffle_window", ConfigType::kInt, "0",
       "records; > 0: bounded-memory shuffle over shard chunks (sets larger than memory)"},
      {"data.throttle_mbps", ConfigType::kDouble, "0",
       "emulate a slow disk at this many MB/s (0 = off)"},
      {"data.train_shards", ConfigType::kString, "\"\"",
       "a loom shard file to train from (from `loom data convert`) instead of data.dir"},
      {"data.context", ConfigType::kInt, "(none)",
       "tokens per window when data.train_shards is a token stream (`loom data convert --text`): "
       "each sample is a window, its labels the next token at every position"},
      {"data.test_shards", ConfigType::kString, "\"\"",
       "a loom shard file to evaluate on (its sample shape and class count must be the "
       "training set's)"},
      {"data.validation", ConfigType::kDouble, "0",
       "a fraction in [0, 1) of the training data held out, chosen by the seed, for the "
       "per-epoch validation figures (val_loss, val_acc), or a shard file to validate on "
       "(with data.train_shards; a token stream holds out its last fraction of tokens); 0 = none: "
       "no per-epoch held-out figure, the test set is "
       "evaluated once at the end either way"},
      {"data.max_classes", ConfigType::kInt, "65536",
       "the largest class count a training set may have (the model has one output per class)"},
      {"data.augment.crop_padding", ConfigType::kInt, "0",
       "random crop after padding by this many pixels (0 = off)"},
      {"data.augment.hflip", ConfigType::kBool, "false", "random horizontal flip"},
  };
}

void apply_pipeline(const PipelineConfig& p, LoaderOptions& opts) {
  opts.workers = p.workers;
  opts.shuffle_window = p.shuffle_window;
  opts.augment = p.augment;
}

std::shared_ptr<const SampleSource> maybe_throttle(std::shared_ptr<const SampleSource> source,
                                                   const PipelineConfig& p) {
  if (p.throttle_mbps <= 0) return source;
  return std::make_shared<ThrottledSource>(std::move(source), p.throttle_mbps);
}

}  // namespace loom::data
