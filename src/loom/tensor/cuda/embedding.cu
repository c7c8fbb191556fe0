// Token embeddings: the lookup (one thread per output value) with a check of every id, and the
// table gradient gathered row by row. Each table row sums its tokens' gradients in index order,
// as the CPU backend does (cpu_seq_ops.cc), so the gradient is the CPU's bits and no atomics
// make it depend on scheduling; the price is that every row scans all n ids (vocab x n id
// reads), which suits the vocabularies of small models.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

// The token id v holds, or -1 (cpu_seq_ops.cc's token_id).
__device__ inline int64_t token_id(float v, int64_t vocab) {
  if (!(v >= 0.0f) || !(v < float(vocab)) || v != floorf(v)) return -1;
  const int64_t id = int64_t(v);
  return id < vocab ? id : -1;
}

constexpr int kRowThreads = 128;

__global__ void embedding_backward_rows(const float* ids, const float* dy, int64_t n, int64_t vocab,
                                        int64_t dim, float* dtable) {
  const int64_t row = blockIdx.x;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      if (token_id(ids[i], vocab) == row) acc += dy[i * dim + d];
    dtable[row * dim + d] = acc;
  }
}

}  // namespace

void embedding_forward(cudaStream_t s, const float* ids, const float* table, int64_t n,
                       int64_t vocab, int64_t dim, float* y, unsigned long long* first_bad) {
  launch_1d(s, n * dim, [=] __device__(int64_t j) {
    const int64_t i = j / dim, d = j - i * dim;
    const int64_t id = token_id(ids[i], vocab);
    if (id < 0) {
      if (d == 0) atomicMin(first_bad, (unsigned long long)i);
      return;
    }
    y[j] = table[id * dim + d];
  });
}

void embedding_backward(cudaStream_t s, const float* ids, const float* dy, int64_t n, int64_t vocab,
                        int64_t dim, float* dtable) {
  if (vocab <= 0 || dim <= 0) return;
  launch_kernel(embedding_backward_rows, s, dim3(unsigned(vocab)), dim3(kRowThreads), 0, ids, dy, n,
                vocab, dim, dtable);
}

}  // namespace loom::cuda
