// The CPU backend's ops for layers that move or scale values: the axis permutation of
// transpose, and the row scaling and row dot products of a broadcast multiply. Sums accumulate
// in double, in index order.
#include <cstring>

#include "loom/tensor/cpu/cpu_backend.h"

namespace loom {

void CpuBackend::permute(const float* x, float* y, int64_t blocks, const Permutation& p) {
  // The trailing axes that keep their place move as one contiguous run per step.
  int rank = p.rank;
  int64_t run = 1;
  while (rank > 0 && p.perm[rank - 1] == rank - 1) run *= p.dims[--rank];
  int64_t block = run;
  for (int i = 0; i < rank; ++i) block *= p.dims[i];
  int64_t src_stride[Permutation::kMaxRank] = {};
  int64_t out_dims[Permutation::kMaxRank] = {};
  for (int i = 0; i < rank; ++i) {
    src_stride[i] = p.source_stride(i);
    out_dims[i] = p.result_dim(i);
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * block;
    float* yb = y + b * block;
    int64_t index[Permutation::kMaxRank] = {};
    int64_t from = 0;
    for (int64_t at = 0; at < block; at += run) {
      std::memcpy(yb + at, xb + from, size_t(run) * sizeof(float));
      // The next position of the result, as an odometer over its axes.
      for (int i = rank - 1; i >= 0; --i) {
        from += src_stride[i];
        if (++index[i] < out_dims[i]) break;
        from -= src_stride[i] * out_dims[i];
        index[i] = 0;
      }
    }
  }
}

void CpuBackend::scale_rows(const float* x, const float* s, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float k = s[r];
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * k;
  }
}

void CpuBackend::row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * cols;
    const float* br = b + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += double(ar[c]) * double(br[c]);
    out[r] = float(sum);
  }
}

}  // namespace loom
