// The Backend interface: every numeric op a layer, loss or optimizer needs, on raw pointers to
// the backend's own memory. Layers call these and never touch a device directly, so the same
// model runs on the CPU backend (cpu/) and the CUDA backend (cuda/). All matrices are row-major.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

enum class Device { kCpu, kCuda };

const char* device_name(Device d);

// Elementwise activations of activation_forward/backward. alpha is LeakyReLU's negative slope
// (ignored by the others). GELU is the exact erf form, PyTorch's default.
// kRelu6: min(max(x, 0), 6). kHardSigmoid: min(max(x / 6 + 1/2, 0), 1), kHardSwish: x times
// that (PyTorch's Hardsigmoid and Hardswish, ONNX's HardSwish).
enum class Activation {
  kRelu,
  kLeakyRelu,
  kGelu,
  kSilu,
  kTanh,
  kSigmoid,
  kRelu6,
  kHardSigmoid,
  kHardSwish
};
const char* activation_name(Activation a);

// Number format of the inputs of the layers' matrix products (gemm and the conv2d_* ops).
// Products are always accumulated and written in fp32; kBf16 and kFp16 round the inputs (A and
// B of gemm; x, w and dy of a convolution) to nearest even first. docs/precision.md.
enum class Precision { kFp32, kBf16, kFp16 };
const char* precision_name(Precision p);  // "fp32", "bf16", "fp16"

// A batch of NCHW images through a grouped, strided, padded, dilated 2-D convolution, as
// PyTorch defines it: out = (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1. Weights are
// [out_c, in_c / groups, kernel_h, kernel_w] row-major.
struct ConvGeometry {
  int64_t batch = 0, in_c = 0, in_h = 0, in_w = 0, out_c = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  bool operator==(const ConvGeometry&) const = default;
  auto operator<=>(const ConvGeometry&) const = default;
};

// A batch of [planes, in_h, in_w] images through a pooling window, PyTorch's semantics: the
// padding (pad_h, pad_w) is on every side, out_h/out_w come from the caller (floor or ceil
// mode), and a window that would start in the right/bottom padding does not exist.
struct PoolGeometry {
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// The axes of a row-major block of `rank` dimensions put in another order: axis i of the
// result is axis perm[i] of the source (ONNX's and NumPy's transpose).
struct Permutation {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t dims[kMaxRank] = {};  // of the source
  int perm[kMaxRank] = {};
  // Result axis i: its size, and the distance in floats between its steps in the source.
  int64_t result_dim(int i) const { return dims[perm[i]]; }
  int64_t source_stride(int i) const {
    int64_t stride = 1;
    for (int j = perm[i] + 1; j < rank; ++j) stride *= dims[j];
    return stride;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // e.g. "cpu (oneDNN)"

  // ---- memory ----
  virtual void* allocate(size_t bytes) = 0;  // aligned to 64 bytes; zeroed
  virtual void deallocate(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // within the device
  virtual void fill(float* x, int64_t n, float value) = 0;
  // rows x cols floats from src (rows `src_stride` floats apart) to dst (`dst_stride` apart):
  // the pieces of a concatenation along an inner axis.
  virtual void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                         int64_t rows, int64_t cols) = 0;
  virtual void synchronize() {}

  // ---- ordering work between the compute thread and a communication thread ----
  // A device backend queues each op on a stream and returns at once; ops run in their
  // stream's order. Every thread queues on the compute stream unless it entered the side
  // stream. A sync strategy's communication thread, which combines gradient buckets while the
  // compute thread queues the rest of backward, works on the side stream so that it waits for
  // exactly the work its bucket needs, not for everything the compute thread queued since:
  //   compute thread:  mark(k)                 once the work bucket k needs is queued
  //   comm thread:     SideStream side(be, k)  its ops now queue on the side stream, after mark k
  //   compute thread:  join_side()             before it queues work that reads what the comm
  //                                            thread wrote
  // The CPU backend runs every op when it is called, so these are no-ops there.
  virtual void mark(int k) { (void)k; }
  virtual void enter_side(int after_mark) { (void)after_mark; }
  virtual void leave_side() {}
  virtual void join_side() {}

  // Threads one call may use (GEMM). Applies to the calling thread only, so each worker
  // thread of the thread transport sets its own.
  virtual void set_intra_op_threads(int threads) = 0;

  // ---- precision of the matrix products ----
  // gemm and the conv2d_* ops round their inputs to matmul_precision() (fp32 by default); the
  // other ops, and every output, are fp32 whatever it is. It applies to every thread that uses
  // this backend. The empty string when this backend runs `p` on this machine, else why not
  // (the base class runs fp32 only).
  virtual std::string matmul_precision_unsupported(Precision p) const;
  // Throws ConfigError with matmul_precision_unsupported(p) when that is not empty.
  void set_matmul_precision(Precision p);
  Precision matmul_precision() const { return matmul_precision_.load(std::memory_order_relaxed); }

 private:
  std::atomic<Precision> matmul_precision_{Precision::kFp32};

 public:
  // ---- dense algebra ----
  // C[M,N] = alpha * op(A) * op(B) + beta * C; op(A) is [M,K], op(B) is [K,N].
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) = 0;
  // y[r, c] += bias[c]
  virtual void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  // dbias[c] = sum_r dy[r, c]
  virtual void sum_rows(const float* dy, float* dbias, int64_t rows, int64_t cols) = 0;
  // Per-channel bias of one [channels, plane] image: y[c, i] += bias[c].
  virtual void add_channel_bias(float* y, const float* bias, int64_t channels, int64_t plane) = 0;
  // dbias[c] += sum_i dy[c, i] (accumulates, so a batch is summed image by image).
  virtual void accumulate_channel_sums(const float* dy, float* dbias, int64_t channels,
                                       int64_t plane) = 0;
  virtual void axpy(int64_t n, float alpha, const float* x, float* y) = 0;  // y += alpha x
  virtual void scale(int64_t n, float alpha, float* x) = 0;                 // x *= alpha

  // ---- activations ----
  // y = max(x, 0), with NaN to 0; y may be x (in place).
  virtual void relu_forward(const float* x, float* y, int64_t n) = 0;
  // dx = dy where y > 0, else 0
  virtual void relu_backward(const float* y, const float* dy, float* dx, int64_t n) = 0;
  // Inverted dropout. Element i is kept iff philox_uniform(key, first_index + i) >= p; kept
  // values are scaled by 1/(1-p). The keep mask is written (1 byte per element) for backward.
  virtual void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p,
                               uint64_t key, uint64_t first_index) = 0;
  virtual void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n,
                                float p) = 0;

  // Any of `Activation`, elementwise over n values. Backward reads x or y, whichever the
  // derivative is cheaper from (both are always passed): dx = f'(x) dy.
  virtual void activation_forward(Activation kind, float alpha, const float* x, float* y,
                                  int64_t n);
  virtual void activation_backward(Activation kind, float alpha, const float* x, const float* y,
                                   const float* dy, float* dx, int64_t n);

  // ---- loss ----
  // Softmax cross-entropy over rows of logits [rows, cols]. Writes dlogits = (softmax - target)
  // * grad_scale, returns the summed loss over rows and the number of rows whose argmax equals
  // the label in *correct. The target is PyTorch's label smoothing, (1 - eps) onehot + eps /
  // cols with eps = label_smoothing; eps = 0 is exactly the plain one-hot arithmetic.
  virtual double softmax_xent(const float* logits, const int32_t* labels, int64_t rows,
                              int64_t cols, float grad_scale, float* dlogits, int64_t* correct,
                              float label_smoothing = 0.0f) = 0;
  // Mean squared error of predictions y [rows, cols] against float targets of the same shape:
  // returns the sum over rows of each row's mean over cols of (y - t)^2 (PyTorch's MSELoss with
  // reduction 'mean' is this divided by rows), and writes dy = 2 (y - t) / cols * grad_scale
  // when dy is not null. Sums in double.
  virtual double mse(const float* y, const float* target, int64_t rows, int64_t cols,
                     float grad_scale, float* dy);
  // Count of rows whose argmax equals the label.
  virtual int64_t count_correct(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t cols) = 0;

  // ---- convolution helpers (NCHW, one image) ----
  virtual void im2col(const float* image, int64_t channels, int64_t height, int64_t width,
                      int64_t kernel, int64_t pad, int64_t stride, float* columns) = 0;
  virtual void col2im(const float* columns, int64_t channels, int64_t height, int64_t width,
                      int64_t kernel, int64_t pad, int64_t stride, float* image) = 0;
  // Max pooling, window = stride = `size`, over [planes, h, w]; argmax indices for backward.
  virtual void maxpool_forward(const float* x, float* y, int32_t* argmax, int64_t planes, int64_t h,
                               int64_t w, int64_t size) = 0;
  virtual void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                                int64_t h, int64_t w, int64_t size) = 0;

  // ---- convolution and pooling over a batch (NCHW) ----
  // The defaults run the square, undilated, ungrouped case through im2col + gemm, one image
  // at a time, and throw for any other geometry; the CPU backend uses oneDNN for all of them.
  // y = conv(x, w) + bias (bias may be null).
  virtual void conv2d_forward(const ConvGeometry& g, const float* x, const float* w,
                              const float* bias, float* y);
  // conv2d_forward in training: the backend may keep what conv2d_backward needs of x (the CPU
  // backend keeps it in oneDNN's layout) for the next conv2d_backward on the same x, so x must
  // not change before that. The default is conv2d_forward.
  virtual void conv2d_forward_training(const ConvGeometry& g, const float* x, const float* w,
                                       const float* bias, float* y) {
    conv2d_forward(g, x, w, bias, y);
  }
  // dx = conv^T(dy, w), overwritten.
  virtual void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                                    float* dx);
  // dw = d(conv)/dw . dy, and dbias = sum of dy per channel when dbias is not null; both
  // overwritten.
  virtual void conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy,
                                       float* dw, float* dbias);
  // conv2d_backward_weights and, when dx is not null, conv2d_backward_data in one call (the
  // default makes those two; the CPU backend brings dy into oneDNN's layout once for both).
  virtual void conv2d_backward(const ConvGeometry& g, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* dbias);
  // argmax[o] is the index within its input plane of the window's first maximum (a window
  // wholly in padding cannot happen: PyTorch's output size rule prevents it).
  virtual void maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax);
  virtual void maxpool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax,
                                  float* dx);
  // Average over the window clipped to the padded input; the divisor counts the padding when
  // count_include_pad, else only the input elements in the window.
  virtual void avgpool2d_forward(const PoolGeometry& g, bool count_include_pad, const float* x,
                                 float* y);
  virtual void avgpool2d_backward(const PoolGeometry& g, bool count_include_pad, const float* dy,
                                  float* dx);

  // ---- batch normalisation over [batch, channels, plane] ----
  // Per-channel sums over batch and plane, accumulated in double: sum[c] = sum (x - shift[c]),
  // sumsq[c] = sum (x - shift[c])^2. shift null means 0; sum or sumsq may be null.
  virtual void channel_moments(const float* x, int64_t batch, int64_t channels, int64_t plane,
                               const float* shift, float* sum, float* sumsq);
  // y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]
  virtual void batchnorm_forward(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                 const float* mean, const float* var, float eps, const float* gamma,
                                 const float* beta, float* y);
  // Per channel, accumulated in double: sum_dy[c] = sum dy, sum_dy_xhat[c] = sum dy xhat with
  // xhat = (x - mean[c]) istd[c], istd = 1 / sqrt(var + eps). Over one replica's batch these
  // are also the gradients of beta and gamma.
  virtual void batchnorm_backward_reduce(const float* x, const float* dy, int64_t batch,
                                         int64_t channels, int64_t plane, const float* mean,
                                         const float* var, float eps, float* sum_dy,
                                         float* sum_dy_xhat);
  // dx = gamma istd (dy - sum_dy / count - xhat sum_dy_xhat / count): batch statistics over
  // `count` values per channel, from the (global) sums above. Null sums stand for zeros, which
  // is the gradient through fixed (running) statistics: dx = gamma istd dy.
  virtual void batchnorm_backward_data(const float* x, const float* dy, int64_t batch,
                                       int64_t channels, int64_t plane, const float* mean,
                                       const float* var, float eps, const float* gamma,
                                       const float* sum_dy, const float* sum_dy_xhat, double count,
                                       float* dx);
  // Training forward without replicas to sum over, in one call: per channel, mean = sum x
  // times inv_count, sumsq = sum (x - mean)^2 (both as channel_moments, then rounded to float),
  // var = sumsq inv_count, and y as batchnorm_forward with them. The default makes those calls;
  // the CPU backend runs them channel by channel, so the later passes read the channel from
  // cache.
  virtual void batchnorm_forward_training(const float* x, int64_t batch, int64_t channels,
                                          int64_t plane, float inv_count, float eps,
                                          const float* gamma, const float* beta, float* mean,
                                          float* var, float* sumsq, float* y);
  // batchnorm_backward_reduce into sum_dy and sum_dy_xhat, then batchnorm_backward_data with
  // them, in one call (the same results; the CPU backend goes channel by channel).
  virtual void batchnorm_backward(const float* x, const float* dy, int64_t batch, int64_t channels,
                                  int64_t plane, const float* mean, const float* var, float eps,
                                  const float* gamma, double count, float* sum_dy,
                                  float* sum_dy_xhat, float* dx);

  // ---- optimizer updates on flat spans ----
  // v = momentum v + (g + wd p); p -= lr (nesterov ? g + wd p + momentum v : v)
  virtual void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum,
                          float weight_decay, bool nesterov) = 0;
  // Adam (Kingma & Ba 2015) with bias correction at step t >= 1; L2 weight decay added to g,
  // or decoupled (AdamW, Loshchilov & Hutter 2019) when decoupled is set.
  virtual void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                           int64_t t) = 0;
  // True if any of x[0..n) is NaN or Inf.
  virtual bool has_non_finite(const float* x, int64_t n) = 0;
  // *flag (one float of this backend's memory) becomes 1 if any of x[0..n) is NaN or Inf, and
  // is left as it is otherwise: the loss scaler's overflow check, which a device backend
  // queues without waiting (has_non_finite returns a host value, so it waits). The default
  // calls has_non_finite.
  virtual void note_non_finite(const float* x, int64_t n, float* flag);

  // ---- sequence models: embeddings, layer normalisation, attention, token losses ----
  // The defaults throw naming the op and the backend (gemm_batched loops over gemm); the CPU
  // and CUDA backends override them all.

  // y[i, :] = table[ids[i], :] for the n token ids (floats holding integers, as the data path
  // carries them) into a [vocab, dim] table. Returns -1, or the index i of the first id that is
  // not an integer in [0, vocab) (y is then unspecified).
  virtual int64_t embedding_forward(const float* ids, const float* table, int64_t n, int64_t vocab,
                                    int64_t dim, float* y);
  // dtable = sum over i with ids[i] = v of dy[i, :], overwritten (rows no id names are zero);
  // each row sums its tokens in index order, so the result does not depend on scheduling.
  virtual void embedding_backward(const float* ids, const float* dy, int64_t n, int64_t vocab,
                                  int64_t dim, float* dtable);

  // Layer normalisation over the last axis of [rows, cols]: mean and variance of each row (sums
  // in double, the variance from a second pass over x - mean), rstd = 1 / sqrt(var + eps),
  // y = (x - mean) rstd gamma + beta. mean and rstd (rows each) are kept for backward.
  virtual void layernorm_forward(const float* x, int64_t rows, int64_t cols, float eps,
                                 const float* gamma, const float* beta, float* y, float* mean,
                                 float* rstd);
  // With xhat = (x - mean) rstd and g = dy gamma: dx = rstd (g - mean(g) - xhat mean(g xhat))
  // per row (dx may be null), dgamma = sum_rows dy xhat and dbeta = sum_rows dy (overwritten,
  // summed in double).
  virtual void layernorm_backward(const float* x, const float* dy, int64_t rows, int64_t cols,
                                  const float* gamma, const float* mean, const float* rstd,
                                  float* dx, float* dgamma, float* dbeta);

  // `batch` GEMMs as gemm(), matrix i at a + i stride_a, b + i stride_b, c + i stride_c.
  virtual void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, int64_t stride_a,
                            const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                            int64_t ldc, int64_t stride_c, int64_t batch);
  // Causal softmax of `blocks` square [t, t] score matrices: row i of a block is the softmax of
  // its entries 0..i (exponentials and sum in double); entries past the diagonal become 0.
  // x and y may be the same buffer.
  virtual void causal_softmax_forward(const float* x, float* y, int64_t blocks, int64_t t);
  // dx = y (dy - sum_j y dy) per row, over the causal entries; 0 past the diagonal. dx may be dy.
  virtual void causal_softmax_backward(const float* y, const float* dy, float* dx, int64_t blocks,
                                       int64_t t);

  // Softmax of each row of a rows x cols matrix (exponentials and sum in double), and its
  // gradient dx = y (dy - sum_j y dy); the causal ops above with every entry visible. x and y,
  // dy and dx, may be the same buffer.
  virtual void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols);
  virtual void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols);

  // ---- layers that move or scale values (reshape, transpose, slice, mul) ----
  // y = x with the axes of each of `blocks` consecutive blocks permuted by p. x and y differ.
  virtual void permute(const float* x, float* y, int64_t blocks, const Permutation& p);
  // y[r, c] = x[r, c] s[r] over a rows x cols matrix; y may be x.
  virtual void scale_rows(const float* x, const float* s, float* y, int64_t rows, int64_t cols);
  // out[r] = sum over c of a[r, c] b[r, c].
  virtual void row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t cols);

  // softmax_xent where rows whose label equals ignore_index count for nothing: no loss, no
  // correct prediction, a zero gradient row. *counted (if not null) is the number of other
  // rows. Any other label outside [0, cols) is an InputError. With no ignored row the loss,
  // gradient and count are softmax_xent's.
  virtual double softmax_xent_ignore(const float* logits, const int32_t* labels, int64_t rows,
                                     int64_t cols, float grad_scale, float* dlogits,
                                     int64_t* correct, float label_smoothing, int32_t ignore_index,
                                     int64_t* counted);
};

// The calling thread on `backend`'s side stream for its lifetime, after mark `after_mark`.
class SideStream {
 public:
  SideStream(Backend& backend, int after_mark) : backend_(backend) {
    backend_.enter_side(after_mark);
  }
  ~SideStream() { backend_.leave_side(); }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

 private:
  Backend& backend_;
};

}  // namespace loom
