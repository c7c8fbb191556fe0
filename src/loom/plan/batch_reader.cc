#include "loom/plan/batch_reader.h"

namespace loom::plan {

int64_t read_batch(const Config& cfg) {
  return cfg.get_int("batch", kDefaultBatch, 1, kMaxBatch);
}

int64_t read_accumulate(const Config& cfg) {
  return cfg.get_int("train.accumulate", 1, 1, int64_t(1) << 20);
}

}  // namespace loom::plan
