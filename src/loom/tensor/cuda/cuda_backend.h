// The CUDA backend: cuBLAS GEMM, one kernel file per op (kernels.h), device memory from a
// caching pool, and two streams. Every op is queued on the compute stream in call order; ops
// that return a host value (softmax_xent, count_correct, has_non_finite) and copy_to_host wait
// for it. The communication stream lets a sync strategy move a bucket's gradients while
// backward goes on: comm_wait_for_compute() orders the comm stream after everything queued so
// far, compute_wait_for_comm() the reverse.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>

#include "loom/tensor/backend.h"
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
  std::string name() const override { return name_; }
  int device_index() const { return device_; }
  // Makes this backend's device current on the calling thread (a communication thread's).
  void bind_device() const { bind(); }

  // ---- streams, for the sync layer ----
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t comm_stream() const { return comm_; }
  void comm_wait_for_compute();
  void compute_wait_for_comm();
  cuda::PoolStats pool_stats() const { return pool_.stats(); }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(float* x, int64_t n, float value) override;
  void synchronize() override;
  void set_intra_op_threads(int threads) override {}  // the GPU picks its own parallelism

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

  double softmax_xent(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                      float grad_scale, float* dlogits, int64_t* correct) override;
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

  void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) override;
  void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, bool decoupled, int64_t t) override;
  bool has_non_finite(const float* x, int64_t n) override;

 private:
  // Makes this backend's device current on the calling thread (cheap when it already is).
  void bind() const;
  // Scratch device memory of at least `bytes`, reused across calls (ops run in stream order).
  void* scratch(size_t bytes);
  // Copies `bytes` of device memory into the pinned readback buffer and waits for it.
  const void* read_back(const void* src, size_t bytes);

  int device_;
  std::string name_;
  cuda::MemoryPool pool_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* pinned_ = nullptr;  // small host buffer for scalar results
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
