#include "loom/plan/data_reader.h"

#include <fmt/format.h>

#include <string>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

namespace loom::plan {

data::PipelineConfig read_pipeline_config(const Config& cfg) {
  data::PipelineConfig p;
  p.workers = int(cfg.get_int("data.workers", 1, 1, 64));
  p.shuffle_window = cfg.get_int("data.shuffle_window", 0, 0, int64_t(1) << 40);
  p.throttle_mbps = cfg.get_double("data.throttle_mbps", 0, 0, 1e6);
  p.train_shards = cfg.get_string("data.train_shards", "");
  p.test_shards = cfg.get_string("data.test_shards", "");
  p.augment.crop_padding = int(cfg.get_int("data.augment.crop_padding", 0, 0, 1024));
  p.augment.hflip = cfg.get_bool("data.augment.hflip", false);
  p.augment.where =
      cfg.where(p.augment.crop_padding > 0 ? "data.augment.crop_padding" : "data.augment.hflip");
  p.max_classes = cfg.get_int("data.max_classes", data::kMaxClasses, 1, data::kShardMaxClasses);
  p.train_shards_where = cfg.where("data.train_shards");
  if (cfg.has("data.context")) p.context = cfg.get_int("data.context", 0, 1, int64_t(1) << 20);
  p.context_where = cfg.where("data.context");
  p.validation = read_validation_choice(cfg);
  // The shuffle window bounds a shuffle, and loader threads fill the batches read ahead.
  if (!cfg.get_bool("data.shuffle", true))
    refuse_unless_default(cfg, "data.shuffle_window", int64_t(0),
                          fmt::format("bounds the shuffle, and data.shuffle is false ({})",
                                      cfg.where("data.shuffle")));
  if (cfg.get_int("data.prefetch", 2, 0, 1024) == 0)
    refuse_unless_default(cfg, "data.workers", int64_t(1),
                          fmt::format("threads fill the batches read ahead, and data.prefetch is "
                                      "0 ({}): the training loop reads each batch itself",
                                      cfg.where("data.prefetch")));
  return p;
}

data::ValidationChoice read_validation_choice(const Config& cfg) {
  data::ValidationChoice v;
  v.where = cfg.where("data.validation");
  if (!cfg.has("data.validation")) return v;
  const ConfigValue& value = cfg.values().at("data.validation");
  if (!value.is_array && value.value.index() == 3) {
    v.shards = std::get<std::string>(value.value);
    if (v.shards.empty())
      throw ConfigError(fmt::format(
          "{}: key 'data.validation': an empty path; give a fraction of the training data in "
          "[0, 1) or a shard file",
          value.where));
    return v;
  }
  if (value.is_array || (value.value.index() != 1 && value.value.index() != 2))
    throw ConfigError(fmt::format(
        "{}: key 'data.validation': expected a fraction in [0, 1) or a shard file path, got {}",
        value.where, config_value_text(value)));
  v.fraction = cfg.get_double("data.validation", 0);
  if (!(v.fraction >= 0 && v.fraction < 1))
    throw ConfigError(fmt::format(
        "{}: key 'data.validation': {} is outside [0, 1): it is the fraction of the training "
        "data held out for validation",
        value.where, v.fraction));
  return v;
}

// With data given in memory (TrainOptions::train_data), the keys that name data files would be
// silently ignored: ConfigError naming the key instead.
void refuse_data_files(const Config& cfg) {
  for (const char* key : {"data.dir", "data.train_shards", "data.test_shards"})
    if (cfg.has(key))
      throw ConfigError(fmt::format(
          "{}: key '{}': the training data is given in memory, so no data file is read; leave "
          "the key out",
          cfg.where(key), key));
}

}  // namespace loom::plan
