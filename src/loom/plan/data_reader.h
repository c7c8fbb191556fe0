// The data.* keys of a run's config beyond data.dir, data.prefetch and data.shuffle (which the
// training loop's settings hold), read into the options of data/.
#pragma once

#include "loom/core/config.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/validation_split.h"

namespace loom::plan {

// Range-checked reads of the input pipeline's keys (ConfigError naming the key and line).
data::PipelineConfig read_pipeline_config(const Config& cfg);

// data.validation: a fraction of the training data in [0, 1), or a shard file to validate on.
// ConfigError naming the key and its line for a number outside [0, 1) or a value of another
// type. A string is a shard file path.
data::ValidationChoice read_validation_choice(const Config& cfg);

// With data given in memory (train::TrainOptions::train_data), the keys that name data files
// would be silently ignored: ConfigError naming the key instead.
void refuse_data_files(const Config& cfg);

}  // namespace loom::plan
