#include "loom/plan/batch_reader.h"

namespace loom::plan {

int64_t read_batch(const Config& cfg) {
  return cfg.get_int("batch", kDefaultBatch, 1, kMaxBatch);
}

}  // namespace loom::plan
