// SGD with momentum, Nesterov and L2 weight decay, the CPU backend's update element by element.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void sgd_update(cudaStream_t s, float* p, const float* g, float* v, int64_t n, float lr,
                float momentum, float weight_decay, bool nesterov) {
  if (momentum == 0.0f) {
    launch_1d(s, n, [=] __device__(int64_t i) { p[i] -= lr * (g[i] + weight_decay * p[i]); });
  } else if (nesterov) {
    launch_1d(s, n, [=] __device__(int64_t i) {
      const float d = g[i] + weight_decay * p[i];
      const float vi = momentum * v[i] + d;
      v[i] = vi;
      p[i] -= lr * (d + momentum * vi);
    });
  } else {
    launch_1d(s, n, [=] __device__(int64_t i) {
      const float vi = momentum * v[i] + (g[i] + weight_decay * p[i]);
      v[i] = vi;
      p[i] -= lr * vi;
    });
  }
}

}  // namespace loom::cuda
