// The CPU backend: GEMM through oneDNN (or OpenBLAS), elementwise loops written so the compiler
// vectorises them (restrict pointers, no branches in the body).
#pragma once

#include "loom/tensor/backend.h"

namespace loom {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override;

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(float* x, int64_t n, float value) override;
  void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                 int64_t cols) override;
  void set_intra_op_threads(int threads) override;

  // bf16 needs AVX512_BF16 (oneDNN's kernels; without it oneDNN would emulate bf16 slowly).
  std::string matmul_precision_unsupported(Precision p) const override;

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override;
  void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override;
  void sum_rows(const float* dy, float* dbias, int64_t rows, int64_t cols) override;
  void add_channel_bias(float* y, const float* bias, int64_t channels, int64_t plane) override;
  void accumulate_channel_sums(const float* dy, float* dbias, int64_t channels,
                               int64_t plane) override;
  void axpy(int64_t n, float alpha, const float* x, float* y) override;
  void scale(int64_t n, float alpha, float* x) override;

  void relu_forward(const float* x, float* y, int64_t n) override;
  void relu_backward(const float* y, const float* dy, float* dx, int64_t n) override;
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, uint64_t key,
                       uint64_t first_index) override;
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n,
                        float p) override;

  void activation_forward(Activation kind, float alpha, const float* x, float* y,
                          int64_t n) override;
  void activation_backward(Activation kind, float alpha, const float* x, const float* y,
                           const float* dy, float* dx, int64_t n) override;

  double softmax_xent(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                      float grad_scale, float* dlogits, int64_t* correct,
                      float label_smoothing = 0.0f) override;
  double mse(const float* y, const float* target, int64_t rows, int64_t cols, float grad_scale,
             float* dy) override;
  int64_t count_correct(const float* logits, const int32_t* labels, int64_t rows,
                        int64_t cols) override;

  void im2col(const float* image, int64_t channels, int64_t height, int64_t width, int64_t kernel,
              int64_t pad, int64_t stride, float* columns) override;
  void col2im(const float* columns, int64_t channels, int64_t height, int64_t width, int64_t kernel,
              int64_t pad, int64_t stride, float* image) override;
  void maxpool_forward(const float* x, float* y, int32_t* argmax, int64_t planes, int64_t h,
                       int64_t w, int64_t size) override;
  void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                        int64_t h, int64_t w, int64_t size) override;

  // Convolution through oneDNN (onednn_conv.h); pooling and batch norm as plain loops
  // (cpu_layer_ops.cc).
  void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                      float* y) override;
  void conv2d_forward_training(const ConvGeometry& g, const float* x, const float* w,
                               const float* bias, float* y) override;
  void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                            float* dx) override;
  void conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                               float* dbias) override;
  void conv2d_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                       float* dx, float* dw, float* dbias) override;
  void maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax) override;
  void maxpool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax,
                          float* dx) override;
  void avgpool2d_forward(const PoolGeometry& g, bool count_include_pad, const float* x,
                         float* y) override;
  void avgpool2d_backward(const PoolGeometry& g, bool count_include_pad, const float* dy,
                          float* dx) override;
  void channel_moments(const float* x, int64_t batch, int64_t channels, int64_t plane,
                       const float* shift, float* sum, float* sumsq) override;
  void batchnorm_forward(const float* x, int64_t batch, int64_t channels, int64_t plane,
                         const float* mean, const float* var, float eps, const float* gamma,
                         const float* beta, float* y) override;
  void batchnorm_backward_reduce(const float* x, const float* dy, int64_t batch, int64_t channels,
                                 int64_t plane, const float* mean, const float* var, float eps,
                                 float* sum_dy, float* sum_dy_xhat) override;
  void batchnorm_backward_data(const float* x, const float* dy, int64_t batch, int64_t channels,
                               int64_t plane, const float* mean, const float* var, float eps,
                               const float* gamma, const float* sum_dy, const float* sum_dy_xhat,
                               double count, float* dx) override;
  void batchnorm_forward_training(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                  float inv_count, float eps, const float* gamma, const float* beta,
                                  float* mean, float* var, float* sumsq, float* y) override;
  void batchnorm_backward(const float* x, const float* dy, int64_t batch, int64_t channels,
                          int64_t plane, const float* mean, const float* var, float eps,
                          const float* gamma, double count, float* sum_dy, float* sum_dy_xhat,
                          float* dx) override;

  void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) override;
  void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, bool decoupled, int64_t t) override;
  bool has_non_finite(const float* x, int64_t n) override;

  // Sequence-model ops (cpu_seq_ops.cc): plain loops, sums in double; gemm_batched runs its
  // GEMMs one after another through gemm().
  int64_t embedding_forward(const float* ids, const float* table, int64_t n, int64_t vocab,
                            int64_t dim, float* y) override;
  void embedding_backward(const float* ids, const float* dy, int64_t n, int64_t vocab, int64_t dim,
                          float* dtable) override;
  void layernorm_forward(const float* x, int64_t rows, int64_t cols, float eps, const float* gamma,
                         const float* beta, float* y, float* mean, float* rstd) override;
  void layernorm_backward(const float* x, const float* dy, int64_t rows, int64_t cols,
                          const float* gamma, const float* mean, const float* rstd, float* dx,
                          float* dgamma, float* dbeta) override;
  void causal_softmax_forward(const float* x, float* y, int64_t blocks, int64_t t) override;
  void causal_softmax_backward(const float* y, const float* dy, float* dx, int64_t blocks,
                               int64_t t) override;
  void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) override;
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override;
  // Layers that move or scale values (cpu_shape_ops.cc).
  void permute(const float* x, float* y, int64_t blocks, const Permutation& p) override;
  void scale_rows(const float* x, const float* s, float* y, int64_t rows, int64_t cols) override;
  void row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t cols) override;
  double softmax_xent_ignore(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                             float grad_scale, float* dlogits, int64_t* correct,
                             float label_smoothing, int32_t ignore_index,
                             int64_t* counted) override;
};

// Process-wide CPU backend (stateless apart from per-thread settings and the matmul precision).
Backend& cpu_backend();

namespace cpu {
// Makes the CPU backend answer as on a CPU without AVX512_BF16, so that tests see the
// configuration error such a machine gives.
void hide_bf16_for_tests(bool hide);
bool bf16_hidden_for_tests();
}  // namespace cpu

}  // namespace loom
