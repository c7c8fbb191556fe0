// The CUDA backend: cuBLAS GEMM, one kernel file per op (kernels.h), convolutions through
// cuDNN where it runs (cudnn_conv.h), device memory from a caching pool, and two streams. A thread
// queues every op on its current stream, in call order: the compute stream, or the communication
// stream for a thread that entered it (Backend::enter_side, SideStream): a sync strategy's
// communication thread, which then waits for the one mark its bucket needs (mark(k), recorded by
// the compute thread when the bucket's gradients are queued) instead of for everything queued on
// the compute stream so far. Ops that return a host value (softmax_xent, count_correct,
// has_non_finite) and copy_to_host wait for the calling thread's stream. comm_wait_for_compute()
// orders the comm stream after everything queued on the compute stream so far,
// compute_wait_for_comm() (and join_side) the reverse.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/tensor/backend.h"
#include "loom/tensor/cuda/cudnn_conv.h"
#include "loom/tensor/cuda/memory_pool.h"

namespace loom {

class CudaBackend final : public Backend {
 public:
  // Binds to `device`; throws ConfigError if there is no such CUDA device.
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::kCuda; }
  // "cuda (<GPU>, sm_<arch>, cuBLAS[ tf32][, cuDNN <version>])": cuDNN named while it runs the
  // convolutions.
  std::string name() const override;
  int device_index() const { return device_; }
  // Makes this backend's device current on the calling thread (a communication thread's).
  void bind_device() const { bind(); }

  // ---- streams, for the sync layer ----
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t comm_stream() const { return comm_; }
  // The stream the calling thread queues on: comm_stream() on a thread inside enter_side()
  // for this backend, else compute_stream().
  cudaStream_t stream() const { return on_side_stream() ? comm_ : compute_; }
  bool on_side_stream() const;
  void comm_wait_for_compute();
  void compute_wait_for_comm();
  // Orders the comm stream after the work the calling thread has queued so far: nothing to do
  // on the side stream (that work is on the comm stream already, and the bucket's mark was
  // waited for on entry); from any other thread, after the compute stream's tail.
  void comm_after_caller();
  cuda::PoolStats pool_stats() const { return pool_.stats(); }

  void mark(int k) override;
  void enter_side(int after_mark) override;
  void leave_side() override;
  void join_side() override { compute_wait_for_comm(); }

  // Memory comes from the pool in compute-stream order: an allocation on the side stream is
  // zeroed on the compute stream and the side stream waits for that, and a block freed on the
  // side stream is handed back only after the compute stream waits for the side stream's work
  // so far (so no compute kernel queued later can get it while a side kernel still uses it).
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(float* x, int64_t n, float value) override;
  void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                 int64_t cols) override;
  void synchronize() override;
  void set_intra_op_threads(int threads) override {}  // the GPU picks its own parallelism

  // fp16 runs on every GPU this build targets; bf16 needs sm_80 or later (cuBLAS's bf16 GEMM
  // and cuDNN's bf16 convolutions). In bf16 and fp16, gemm and gemm_batched round A and B to
  // the format (nearest even) into scratch and run cublasGemmEx with fp32 accumulation
  // (CUBLAS_COMPUTE_32F) and an fp32 C, so alpha, beta and C are fp32 as in fp32 mode; the
  // convolutions follow on either engine (see conv2d_forward). docs/precision.md.
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

  // ---- which code runs the convolutions ----
  // kAuto: cuDNN when this build has it and it loads and starts here, else loom's own kernels.
  // kCudnn: cuDNN or an error (ConfigError from here when it cannot be loaded or started).
  // kLoom: loom's own kernels. Under kAuto and kCudnn a geometry cuDNN declines
  // (CudnnConv::forward) runs on loom's kernels, counted in cudnn_stats(). The constructor takes
  // the mode from the environment variable LOOM_CUDNN (unset or "auto", "1" for kCudnn, "0" for
  // kLoom).
  enum class ConvEngine { kAuto, kCudnn, kLoom };
  void set_conv_engine(ConvEngine engine);
  // What the next convolution runs on: "cudnn <version>" or "loom".
  std::string conv_engine() const;
  // Why convolutions do not run on cuDNN (empty when they do): not built, not loadable, not
  // able to start on this GPU, or turned off.
  std::string cudnn_unavailable() const;
  // Calls cuDNN ran and declined (zeros when it is not in use).
  cuda::CudnnStats cudnn_stats() const;

  // Convolution through cuDNN (cudnn_conv.h) when the engine is cuDNN and it takes the
  // geometry, else through loom's own kernels: im2col/col2im for any ConvGeometry, then one
  // cuBLAS GEMM per image and group (a 1x1, stride 1, unpadded convolution skips im2col).
  // In bf16 or fp16, loom's kernels run their GEMMs in that precision (gemm rounds the
  // im2col columns and the weights, fp32 accumulation and output: what the CPU backend's
  // oneDNN convolutions compute); cuDNN runs on rounded copies of x, w and dy with its
  // PSEUDO_HALF / PSEUDO_BFLOAT16 configuration (fp32 accumulation), which writes y, dx and dw
  // in the low format, widened back to fp32; the bias and its gradient stay fp32.
  void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                      float* y) override;
  void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                            float* dx) override;
  void conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                               float* dbias) override;
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

  void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) override;
  void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, bool decoupled, int64_t t) override;
  bool has_non_finite(const float* x, int64_t n) override;
  void note_non_finite(const float* x, int64_t n, float* flag) override;

  // ---- sequence models: embedding.cu, layernorm.cu, causal_softmax.cu, xent_ignore.cu, and
  // cuBLAS's strided batched GEMM ----
  // embedding_forward returns whether an id was bad, so like softmax_xent it waits for the
  // calling thread's stream.
  int64_t embedding_forward(const float* ids, const float* table, int64_t n, int64_t vocab,
                            int64_t dim, float* y) override;
  void embedding_backward(const float* ids, const float* dy, int64_t n, int64_t vocab, int64_t dim,
                          float* dtable) override;
  void layernorm_forward(const float* x, int64_t rows, int64_t cols, float eps, const float* gamma,
                         const float* beta, float* y, float* mean, float* rstd) override;
  void layernorm_backward(const float* x, const float* dy, int64_t rows, int64_t cols,
                          const float* gamma, const float* mean, const float* rstd, float* dx,
                          float* dgamma, float* dbeta) override;
  void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                    int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                    int64_t batch) override;
  void causal_softmax_forward(const float* x, float* y, int64_t blocks, int64_t t) override;
  void causal_softmax_backward(const float* y, const float* dy, float* dx, int64_t blocks,
                               int64_t t) override;
  void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) override;
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override;
  // Layers that move or scale values (shape_ops.cu).
  void permute(const float* x, float* y, int64_t blocks, const Permutation& p) override;
  void scale_rows(const float* x, const float* s, float* y, int64_t rows, int64_t cols) override;
  void row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t cols) override;
  double softmax_xent_ignore(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                             float grad_scale, float* dlogits, int64_t* correct,
                             float label_smoothing, int32_t ignore_index,
                             int64_t* counted) override;

 private:
  // Makes this backend's device current on the calling thread (cheap when it already is).
  void bind() const;
  // Frees what the constructor created, ignoring errors: the destructor's work, and a failed
  // constructor's (which no destructor follows).
  void release() noexcept;
  // 0 for the compute stream, 1 for the side stream: the calling thread's slot of the
  // per-stream scratch, readback and cuBLAS handle, so the two threads never share one.
  int lane() const { return on_side_stream() ? 1 : 0; }
  static cublasHandle_t make_cublas(cudaStream_t stream);
  // The calling thread's cuBLAS handle (the side stream's made on first use).
  cublasHandle_t cublas();
  // Scratch device memory of at least `bytes`, reused across calls on the calling thread's
  // stream (ops run in stream order).
  void* scratch(size_t bytes);
  // The same for the low-precision copies of a product's operands: a buffer of its own, since
  // loom's convolutions hold their im2col columns in scratch() while their GEMMs round.
  void* low_scratch(size_t bytes);
  struct Scratch {
    void* p = nullptr;
    size_t bytes = 0;
  };
  void* grow(Scratch& sc, size_t bytes);
  // gemm / gemm_batched in matmul_precision() (bf16 or fp16), batch >= 1, k >= 1.
  void low_precision_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, int64_t stride_a, const float* b,
                          int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                          int64_t stride_c, int64_t batch);
  // Copies `bytes` of device memory into the calling thread's pinned readback buffer and
  // waits for its stream.
  const void* read_back(const void* src, size_t bytes);
  // cuDNN for this call (its lane's handle made), or null for loom's kernels; under kAuto a
  // cuDNN that cannot start hands every later convolution to loom's kernels.
  cuda::CudnnConv* cudnn_for_call();
  cuda::CudnnLane cudnn_lane();
  void update_name();  // under conv_mu_

  int device_;
  std::string device_label_;  // "<GPU>, sm_<arch>, cuBLAS[ tf32]"
  std::string name_;
  // The convolution engine: mode, the opened library (null when not built, not loadable or not
  // asked for) and why cuDNN is not used. name_ and the strings under conv_mu_.
  mutable std::mutex conv_mu_;
  std::atomic<ConvEngine> conv_mode_{ConvEngine::kLoom};
  std::unique_ptr<cuda::CudnnConv> cudnn_;
  std::string cudnn_why_not_;
  cuda::MemoryPool pool_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  cublasHandle_t cublas_[2] = {nullptr, nullptr};  // bound to compute_, comm_
  Scratch scratch_[2];
  Scratch low_[2];          // low_scratch(), per lane
  int sm_ = 0;              // compute capability, major * 10 + minor
  void* pinned_ = nullptr;  // small host buffer for scalar results, one half per stream
  // mark(k)'s events, grown on demand by the compute thread, read by the comm thread; also
  // guards the side stream's cuBLAS handle.
  std::mutex marks_mu_;
  std::vector<cudaEvent_t> marks_;
  // copy_to_device's pinned staging ring (cudaHostAlloc), grown to the largest copy seen.
  struct Staging {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;  // recorded after the slot's last copy
  };
  static constexpr int kStagingSlots = 2;
  Staging staging_[kStagingSlots];
  int staging_next_ = 0;
  std::mutex staging_mu_;
};

// The registry's entry point (backend_registry.cc). Throws ConfigError naming the cause when
// no CUDA device can be used (no GPU, no driver).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace loom
