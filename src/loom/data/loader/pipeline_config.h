// The `data.*` config keys of the input pipeline that go beyond the foundation's data.dir,
// data.prefetch and data.shuffle (which the train layer reads itself), in the pattern of
// nn::model_config_keys(): the train layer appends these specs, and the run plan reads them
// (plan/data_reader.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/config_value.h"
#include "loom/data/loader/augment.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/sample_source.h"
#include "loom/data/sources/set_checks.h"
#include "loom/data/sources/validation_split.h"

namespace loom::data {

struct PipelineConfig {
  int workers = 1;             // data.workers
  int64_t shuffle_window = 0;  // data.shuffle_window (records; 0 = full permutation)
  double throttle_mbps = 0;    // data.throttle_mbps (0 = unthrottled)
  std::string train_shards;    // data.train_shards: a shard file used instead of data.dir's IDX
  std::string test_shards;     // data.test_shards
  AugmentOptions augment;      // data.augment.crop_padding, data.augment.hflip
  int64_t max_classes = kMaxClasses;  // data.max_classes: the largest class count accepted
  std::string train_shards_where = "data.train_shards";  // where it was set, for errors
  // data.context: tokens per window of a token stream; nullopt when unset.
  std::optional<int64_t> context;
  std::string context_where = "data.context";
  ValidationChoice validation;  // data.validation
};

std::vector<ConfigKeySpec> data_config_keys();
// workers, shuffle_window and augment into loader options.
void apply_pipeline(const PipelineConfig& p, LoaderOptions& opts);
// `source` behind a ThrottledSource when throttle_mbps > 0, else `source` itself.
std::shared_ptr<const SampleSource> maybe_throttle(std::shared_ptr<const SampleSource> source,
                                                   const PipelineConfig& p);

}  // namespace loom::data
