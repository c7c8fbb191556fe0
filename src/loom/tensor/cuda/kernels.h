// Host-side entry points of the CUDA kernels, one group per .cu file. Plain C++ (no CUDA
// syntax), so cuda_backend.cc is compiled by the host compiler. Every pointer is device
// memory; every launcher queues work on `stream` and returns without waiting. Semantics are
// those of the same-named Backend op (tensor/backend.h), which the CPU backend defines.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

// fill.cu
void fill(cudaStream_t s, float* x, int64_t n, float value);

// bias.cu. sum_rows needs a workspace of sum_rows_workspace_floats(rows, cols) floats.
void add_bias(cudaStream_t s, float* y, const float* bias, int64_t rows, int64_t cols);
int64_t sum_rows_workspace_floats(int64_t rows, int64_t cols);
void sum_rows(cudaStream_t s, const float* dy, float* dbias, int64_t rows, int64_t cols,
              float* workspace);
void add_channel_bias(cudaStream_t s, float* y, const float* bias, int64_t channels, int64_t plane);
void accumulate_channel_sums(cudaStream_t s, const float* dy, float* dbias, int64_t channels,
                             int64_t plane);

// blas1.cu
void axpy(cudaStream_t s, int64_t n, float alpha, const float* x, float* y);
void scale(cudaStream_t s, int64_t n, float alpha, float* x);

// relu.cu
void relu_forward(cudaStream_t s, const float* x, float* y, int64_t n);
void relu_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n);

// dropout.cu (keep iff the draw's top 24 bits >= threshold = ceil(p 2^24); keep_scale =
// 1/(1-p); both computed by the caller as the CPU backend does)
void dropout_forward(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n,
                     uint32_t threshold, float keep_scale, uint64_t key, uint64_t first_index);
void dropout_backward(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n,
                      float keep_scale);

// softmax_xent.cu. Per-row results go to row_loss/row_correct (rows entries each), then
// reduce_loss sums them in a fixed order into out[0] (loss, double) and out[1] (correct, as a
// double holding an integer). dlogits may be null (count only). label_smoothing as in
// Backend::softmax_xent (0: the one-hot arithmetic, unchanged).
void softmax_xent_rows(cudaStream_t s, const float* logits, const int32_t* labels, int64_t rows,
                       int64_t cols, float grad_scale, float label_smoothing, float* dlogits,
                       double* row_loss, double* row_correct);
void reduce_loss(cudaStream_t s, const double* row_loss, const double* row_correct, int64_t rows,
                 double* out);

// mse.cu: row_loss[r] = mean over cols of (y - t)^2 in double; dy = 2 (y - t) / cols *
// grad_scale when not null (as the CPU backend).
void mse_rows(cudaStream_t s, const float* y, const float* target, int64_t rows, int64_t cols,
              float grad_scale, float* dy, double* row_loss);

// im2col.cu (one image, NCHW)
void im2col(cudaStream_t s, const float* image, int64_t channels, int64_t height, int64_t width,
            int64_t kernel, int64_t pad, int64_t stride, float* columns);
void col2im(cudaStream_t s, const float* columns, int64_t channels, int64_t height, int64_t width,
            int64_t kernel, int64_t pad, int64_t stride, float* image);

// maxpool.cu
void maxpool_forward(cudaStream_t s, const float* x, float* y, int32_t* argmax, int64_t planes,
                     int64_t h, int64_t w, int64_t size);
void maxpool_backward(cudaStream_t s, const float* dy, const int32_t* argmax, float* dx,
                      int64_t planes, int64_t h, int64_t w, int64_t size);

// The geometry of Backend::conv2d_* and *pool2d_* (tensor/backend.h's ConvGeometry and
// PoolGeometry, whose C++20 comparisons nvcc's C++17 cannot read), copied field by field.
struct ConvDims {
  int64_t batch, in_c, in_h, in_w, out_c, out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
};
struct PoolDims {
  int64_t planes, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

// activation.cu. kind is the value of loom::Activation (kRelu 0, kLeakyRelu 1, kGelu 2,
// kSilu 3, kTanh 4, kSigmoid 5, kRelu6 6, kHardSigmoid 7, kHardSwish 8; cuda_backend.cc checks
// the numbering); alpha is LeakyReLU's.
void activation_forward(cudaStream_t s, int kind, float alpha, const float* x, float* y, int64_t n);
void activation_backward(cudaStream_t s, int kind, float alpha, const float* x, const float* y,
                         const float* dy, float* dx, int64_t n);

// conv2d.cu: the pieces of the own-kernel convolution (cuda_backend.cc runs the per-group
// GEMMs). conv_im2col: image n's columns [in_c kernel_h kernel_w, out_h out_w] (rectangular,
// strided, padded, dilated window; the groups' rows one block after another); conv_col2im: its
// adjoint, dx of image n overwritten, gathered in a fixed order (no atomics).
void conv_im2col(cudaStream_t s, const ConvDims& g, const float* image, float* columns);
void conv_col2im(cudaStream_t s, const ConvDims& g, const float* columns, float* image);
// y[n, c, i] += bias[c] over the batch.
void conv_add_bias(cudaStream_t s, float* y, const float* bias, int64_t batch, int64_t channels,
                   int64_t plane);
// dbias[c] = sum over n, i of dy[n, c, i] (overwritten), one block per channel.
void conv_bias_grad(cudaStream_t s, const float* dy, float* dbias, int64_t batch, int64_t channels,
                    int64_t plane);

// pool2d.cu. Backward passes overwrite dx and gather (each input sums its windows' shares in
// output order, the CPU's), so they are exact and deterministic.
void maxpool2d_forward(cudaStream_t s, const PoolDims& g, const float* x, float* y,
                       int32_t* argmax);
void maxpool2d_backward(cudaStream_t s, const PoolDims& g, const float* dy, const int32_t* argmax,
                        float* dx);
void avgpool2d_forward(cudaStream_t s, const PoolDims& g, bool count_include_pad, const float* x,
                       float* y);
void avgpool2d_backward(cudaStream_t s, const PoolDims& g, bool count_include_pad, const float* dy,
                        float* dx);

// batchnorm.cu: per-channel sums (one block per channel, in double), and the elementwise
// passes; the arguments are Backend's.
void channel_moments(cudaStream_t s, const float* x, int64_t batch, int64_t channels, int64_t plane,
                     const float* shift, float* sum, float* sumsq);
void batchnorm_forward(cudaStream_t s, const float* x, int64_t batch, int64_t channels,
                       int64_t plane, const float* mean, const float* var, float eps,
                       const float* gamma, const float* beta, float* y);
void batchnorm_backward_reduce(cudaStream_t s, const float* x, const float* dy, int64_t batch,
                               int64_t channels, int64_t plane, const float* mean, const float* var,
                               float eps, float* sum_dy, float* sum_dy_xhat);
void batchnorm_backward_data(cudaStream_t s, const float* x, const float* dy, int64_t batch,
                             int64_t channels, int64_t plane, const float* mean, const float* var,
                             float eps, const float* gamma, const float* sum_dy,
                             const float* sum_dy_xhat, double count, float* dx);

// sgd.cu, adam.cu (c1, c2: Adam's bias corrections 1/(1 - beta^t), computed by the caller)
void sgd_update(cudaStream_t s, float* p, const float* g, float* v, int64_t n, float lr,
                float momentum, float weight_decay, bool nesterov);
void adam_update(cudaStream_t s, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                 float beta1, float beta2, float eps, float l2, float shrink, float c1, float c2);

// non_finite.cu: *flag (device int, zeroed by the caller) becomes 1 if any value is NaN/Inf.
void find_non_finite(cudaStream_t s, const float* x, int64_t n, int* flag);

// low_precision.cu. The formats of the low-precision matrix products (2 bytes per value).
enum class LowFormat { kBf16, kFp16 };
// Rounds `batch` row-major [rows, cols] fp32 matrices, `ld` floats between rows and `stride`
// between matrices, to nearest even into dst, packed (rows x cols values per matrix).
void round_matrices(cudaStream_t s, LowFormat format, const float* src, int64_t batch, int64_t rows,
                    int64_t cols, int64_t ld, int64_t stride, void* dst);
// n packed low-precision values to fp32 (exact).
void widen(cudaStream_t s, LowFormat format, const void* src, int64_t n, float* dst);
// *flag (device float) becomes 1 if any of x[0..n) is NaN/Inf; left as it is otherwise.
void mark_non_finite(cudaStream_t s, const float* x, int64_t n, float* flag);

// embedding.cu. *first_bad (device, set to n or more by the caller) becomes the smallest index
// of an id that is not an integer in [0, vocab) when there is one; y is then unspecified.
void embedding_forward(cudaStream_t s, const float* ids, const float* table, int64_t n,
                       int64_t vocab, int64_t dim, float* y, unsigned long long* first_bad);
void embedding_backward(cudaStream_t s, const float* ids, const float* dy, int64_t n, int64_t vocab,
                        int64_t dim, float* dtable);

// layernorm.cu (dx may be null)
void layernorm_forward(cudaStream_t s, const float* x, int64_t rows, int64_t cols, float eps,
                       const float* gamma, const float* beta, float* y, float* mean, float* rstd);
void layernorm_backward(cudaStream_t s, const float* x, const float* dy, int64_t rows, int64_t cols,
                        const float* gamma, const float* mean, const float* rstd, float* dx,
                        float* dgamma, float* dbeta);

// causal_softmax.cu: rows of t entries, softmaxed over all of them or (causal) row r over its
// entries 0..r % t, of square [t, t] blocks (x and y, dy and dx, may be the same buffer)
void softmax_rows(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t t, bool causal);
void softmax_rows_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t rows,
                           int64_t t, bool causal);

// shape_ops.cu (scale_rows: y may be x). permute: Backend::permute's Permutation as, per axis
// of the result, its size and the source stride it walks (cuda_backend.cc fills it in).
struct PermutedAxes {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
};
void permute(cudaStream_t s, const float* x, float* y, int64_t blocks, const PermutedAxes& axes);
void scale_rows(cudaStream_t s, const float* x, const float* k, float* y, int64_t rows,
                int64_t cols);
void row_dots(cudaStream_t s, const float* a, const float* b, float* out, int64_t rows,
              int64_t cols);

// xent_ignore.cu: after softmax_xent_rows, rows labelled ignore_index get zero loss, correct and
// gradient; row_counted[r] is 1 for the other rows, 0 for those.
void clear_ignored_rows(cudaStream_t s, const int32_t* labels, int64_t rows, int64_t cols,
                        int32_t ignore_index, float* dlogits, double* row_loss, double* row_correct,
                        double* row_counted);

}  // namespace loom::cuda
