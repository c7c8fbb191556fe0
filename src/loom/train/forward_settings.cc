#include "loom/train/forward_settings.h"

#include <algorithm>
#include <thread>

namespace loom::train {

int64_t forward_chunk(int64_t positions_per_sample) {
  return std::max<int64_t>(1, kForwardPositions / std::max<int64_t>(1, positions_per_sample));
}

int use_forward_threads(Backend& backend, int requested) {
  const int threads =
      requested > 0 ? requested : int(std::max(1u, std::thread::hardware_concurrency()));
  backend.set_intra_op_threads(threads);
  return threads;
}

}  // namespace loom::train
