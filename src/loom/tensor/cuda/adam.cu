// Adam (Kingma & Ba 2015): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
// p = p * shrink - lr (m c1) / (sqrt(v c2) + eps), with c1, c2 the bias corrections. L2 decay
// enters g (l2); decoupled decay (AdamW, Loshchilov & Hutter 2019) enters shrink = 1 - lr wd.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void adam_update(cudaStream_t s, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                 float beta1, float beta2, float eps, float l2, float shrink, float c1, float c2) {
  launch_1d(s, n, [=] __device__(int64_t i) {
    const float gi = g[i] + l2 * p[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * shrink - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
  });
}

}  // namespace loom::cuda
