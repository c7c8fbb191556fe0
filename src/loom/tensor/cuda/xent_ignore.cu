// The token loss with an ignored label: softmax_xent_rows computes every row, then the rows
// whose label is the ignored one are cleared (no loss, no correct prediction, zero gradient)
// and the counted rows are flagged. Counted rows keep softmax_xent's bits exactly.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void clear_ignored_rows(cudaStream_t s, const int32_t* labels, int64_t rows, int64_t cols,
                        int32_t ignore_index, float* dlogits, double* row_loss, double* row_correct,
                        double* row_counted) {
  launch_1d(s, rows, [=] __device__(int64_t r) {
    const bool ignored = labels[r] == ignore_index;
    row_counted[r] = ignored ? 0.0 : 1.0;
    if (!ignored) return;
    row_loss[r] = 0.0;
    row_correct[r] = 0.0;
    if (dlogits)
      for (int64_t c = 0; c < cols; ++c) dlogits[r * cols + c] = 0.0f;
  });
}

}  // namespace loom::cuda
