#include "loom/tensor/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "loom/core/error.h"
#include "loom/tensor/cuda/cuda_check.h"
#include "loom/tensor/cuda/kernels.h"

namespace loom {

namespace {

constexpr size_t kPinnedBytes = 256;  // two halves: compute stream, side stream
constexpr size_t kPinnedLane = kPinnedBytes / 2;
// Host-to-device copies up to this size go through the pinned staging ring (larger ones, rare
// and not per step, take the driver's pageable path).
constexpr size_t kStageMaxBytes = size_t(64) << 20;

// The CUDA backend's environment knobs, read here only (docs/gpu.md lists them):
//   LOOM_CUDA_TF32=1  lets cuBLAS use TF32 tensor cores for fp32 GEMM (default 0: plain fp32,
//                     the CPU's precision; TF32 keeps 10 mantissa bits).
//   LOOM_CUDNN=0|1|auto  which code runs the convolutions (CudaBackend::ConvEngine): loom's
//                     kernels, cuDNN or an error, cuDNN when it can (the default).
bool tf32_enabled() {
  const char* v = std::getenv("LOOM_CUDA_TF32");
  return v && std::strcmp(v, "0") != 0 && *v != '\0';
}

CudaBackend::ConvEngine conv_engine_from_env() {
  const char* v = std::getenv("LOOM_CUDNN");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0)
    return CudaBackend::ConvEngine::kAuto;
  if (std::strcmp(v, "0") == 0) return CudaBackend::ConvEngine::kLoom;
  if (std::strcmp(v, "1") == 0) return CudaBackend::ConvEngine::kCudnn;
  throw ConfigError(fmt::format(
      "LOOM_CUDNN={}: expected 0 (loom's convolution kernels), 1 (cuDNN, an error where it "
      "cannot run) or auto (cuDNN where it can run)",
      v));
}

int& current_device_cache() {
  thread_local int device = -1;
  return device;
}

// The backend whose side stream the calling thread is on (enter_side), or null.
const CudaBackend*& side_of_this_thread() {
  thread_local const CudaBackend* backend = nullptr;
  return backend;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

CudaBackend::CudaBackend(int device) : device_(device), pool_(device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw ConfigError(fmt::format("backend 'cuda': no CUDA device found ({})",
                                  e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"));
  }
  if (device < 0 || device >= count)
    throw ConfigError(
        fmt::format("backend 'cuda': device {} does not exist ({} found)", device, count));
  try {
    current_device_cache() = -1;
    bind();
    cudaDeviceProp prop{};
    LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    sm_ = prop.major * 10 + prop.minor;
    device_label_ = fmt::format("{}, sm_{}{}, cuBLAS{}", prop.name, prop.major, prop.minor,
                                tf32_enabled() ? " tf32" : "");
    // Non-blocking streams: they do not serialise with the legacy default stream that other
    // libraries may use.
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    // One cuBLAS handle per stream (a handle is not to be used by two threads at once); the
    // side stream's on its first GEMM, which a communication thread rarely needs.
    cublas_[0] = make_cublas(compute_);
    LOOM_CUDA_CHECK(cudaMallocHost(&pinned_, kPinnedBytes));
    set_conv_engine(conv_engine_from_env());
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() {
  release();
}

void CudaBackend::release() noexcept {
  // No throwing from a destructor: errors here (a device already lost) are dropped, and
  // cleared so that no later launch check reports them as its own.
  LOOM_CUDA_IGNORE(cudaSetDevice(device_));
  current_device_cache() = -1;
  if (side_of_this_thread() == this) side_of_this_thread() = nullptr;
  if (compute_) LOOM_CUDA_IGNORE(cudaStreamSynchronize(compute_));
  if (comm_) LOOM_CUDA_IGNORE(cudaStreamSynchronize(comm_));
  cudnn_.reset();  // its handles are bound to the streams destroyed below
  for (Scratch* group : {scratch_, low_})
    for (int l = 0; l < 2; ++l) {
      if (group[l].p) pool_.deallocate(group[l].p);
      group[l] = Scratch{};
    }
  for (cublasHandle_t& h : cublas_) {
    if (h) LOOM_CUDA_IGNORE(cublasDestroy(h));
    h = nullptr;
  }
  for (cudaEvent_t* ev : {&compute_done_, &comm_done_}) {
    if (*ev) LOOM_CUDA_IGNORE(cudaEventDestroy(*ev));
    *ev = nullptr;
  }
  for (cudaEvent_t& ev : marks_) LOOM_CUDA_IGNORE(cudaEventDestroy(ev));
  marks_.clear();
  for (cudaStream_t* st : {&compute_, &comm_}) {
    if (*st) LOOM_CUDA_IGNORE(cudaStreamDestroy(*st));
    *st = nullptr;
  }
  if (pinned_) LOOM_CUDA_IGNORE(cudaFreeHost(pinned_));
  pinned_ = nullptr;
  for (Staging& st : staging_) {
    if (st.host) LOOM_CUDA_IGNORE(cudaFreeHost(st.host));
    if (st.done) LOOM_CUDA_IGNORE(cudaEventDestroy(st.done));
    st = Staging{};
  }
}

void CudaBackend::bind() const {
  int& cached = current_device_cache();
  if (cached != device_) {
    LOOM_CUDA_CHECK(cudaSetDevice(device_));
    cached = device_;
  }
}

std::string CudaBackend::name() const {
  std::lock_guard<std::mutex> lock(conv_mu_);
  return name_;
}

void CudaBackend::update_name() {
  const bool dnn = conv_mode_.load() != ConvEngine::kLoom && cudnn_ != nullptr;
  name_ = fmt::format("cuda ({}{})", device_label_,
                      dnn ? fmt::format(", cuDNN {}", cudnn_->version()) : std::string());
}

void CudaBackend::set_conv_engine(ConvEngine engine) {
  bind();
  std::lock_guard<std::mutex> lock(conv_mu_);
  if (engine == ConvEngine::kLoom) {
    cudnn_why_not_ = "loom's own kernels were asked for (LOOM_CUDNN=0)";
  } else {
    std::string why;
    if (!cudnn_) cudnn_ = cuda::CudnnConv::open(device_, tf32_enabled(), &why);
    // Asked for by name: start it now (this loads cuDNN's engine libraries), so that a cuDNN
    // that cannot run here is an error before any work; under kAuto on the first convolution.
    if (cudnn_ && engine == ConvEngine::kCudnn &&
        !cudnn_->ready({0, compute_, nullptr, nullptr}, &why)) {
      conv_mode_ = ConvEngine::kLoom;
      cudnn_why_not_ = why;
      update_name();
      throw ConfigError(
          fmt::format("backend 'cuda': cuDNN was asked for (LOOM_CUDNN=1) but {}", why));
    }
    if (!cudnn_) {
      conv_mode_ = ConvEngine::kLoom;
      cudnn_why_not_ = why;
      update_name();
      if (engine == ConvEngine::kCudnn)
        throw ConfigError(
            fmt::format("backend 'cuda': cuDNN was asked for (LOOM_CUDNN=1) but {}", why));
      return;
    }
    cudnn_why_not_.clear();
  }
  conv_mode_ = engine;
  update_name();
}

std::string CudaBackend::conv_engine() const {
  std::lock_guard<std::mutex> lock(conv_mu_);
  if (conv_mode_.load() == ConvEngine::kLoom || !cudnn_) return "loom";
  return "cudnn " + cudnn_->version();
}

std::string CudaBackend::cudnn_unavailable() const {
  std::lock_guard<std::mutex> lock(conv_mu_);
  return cudnn_why_not_;
}

cuda::CudnnStats CudaBackend::cudnn_stats() const {
  std::lock_guard<std::mutex> lock(conv_mu_);
  return cudnn_ ? cudnn_->stats() : cuda::CudnnStats{};
}

cuda::CudnnLane CudaBackend::cudnn_lane() {
  return {lane(), stream(), [this](size_t bytes) { return scratch(bytes); },
          [this](size_t bytes) { return low_scratch(bytes); }};
}

cuda::CudnnConv* CudaBackend::cudnn_for_call() {
  const ConvEngine mode = conv_mode_.load();
  if (mode == ConvEngine::kLoom) return nullptr;
  std::string why;
  if (cudnn_->ready(cudnn_lane(), &why)) return cudnn_.get();
  if (mode == ConvEngine::kCudnn)
    throw Error(fmt::format("backend 'cuda': cuDNN was asked for (LOOM_CUDNN=1) but {}", why));
  // kAuto: this machine's cuDNN cannot start (an engine library missing, a GPU it does not
  // know); loom's kernels from now on, and name() and cudnn_unavailable() say so.
  std::lock_guard<std::mutex> lock(conv_mu_);
  conv_mode_ = ConvEngine::kLoom;
  cudnn_why_not_ = why;
  update_name();
  return nullptr;
}

cublasHandle_t CudaBackend::make_cublas(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  LOOM_CUDA_CHECK(cublasCreate(&h));
  try {
    LOOM_CUDA_CHECK(cublasSetStream(h, stream));
    LOOM_CUDA_CHECK(
        cublasSetMathMode(h, tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  } catch (...) {
    LOOM_CUDA_IGNORE(cublasDestroy(h));
    throw;
  }
  return h;
}

cublasHandle_t CudaBackend::cublas() {
  const int l = lane();
  if (l == 1) {
    std::lock_guard<std::mutex> lock(marks_mu_);
    if (!cublas_[1]) cublas_[1] = make_cublas(comm_);
  }
  return cublas_[l];
}

void* CudaBackend::scratch(size_t bytes) {
  return grow(scratch_[lane()], bytes);
}

void* CudaBackend::low_scratch(size_t bytes) {
  return grow(low_[lane()], bytes);
}

void* CudaBackend::grow(Scratch& sc, size_t bytes) {
  if (bytes > sc.bytes) {
    if (sc.p) deallocate(sc.p);
    sc.p = nullptr;
    sc.bytes = 0;
    sc.p = pool_.allocate(bytes);
    if (on_side_stream()) comm_wait_for_compute();  // after the block's last compute use
    sc.bytes = cuda::MemoryPool::size_class(bytes);
  }
  return sc.p;
}

const void* CudaBackend::read_back(const void* src, size_t bytes) {
  LOOM_CHECK_LE(bytes, kPinnedLane);
  void* host = static_cast<char*>(pinned_) + size_t(lane()) * kPinnedLane;
  const cudaStream_t s = stream();
  LOOM_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

bool CudaBackend::on_side_stream() const {
  return side_of_this_thread() == this;
}

void CudaBackend::comm_wait_for_compute() {
  bind();
  LOOM_CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
  LOOM_CUDA_CHECK(cudaStreamWaitEvent(comm_, compute_done_, 0));
}

void CudaBackend::compute_wait_for_comm() {
  bind();
  LOOM_CUDA_CHECK(cudaEventRecord(comm_done_, comm_));
  LOOM_CUDA_CHECK(cudaStreamWaitEvent(compute_, comm_done_, 0));
}

void CudaBackend::comm_after_caller() {
  if (!on_side_stream()) comm_wait_for_compute();
}

void CudaBackend::mark(int k) {
  LOOM_CHECK_GE(k, 0);
  bind();
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(marks_mu_);
    while (marks_.size() <= size_t(k)) {
      cudaEvent_t e = nullptr;
      LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      marks_.push_back(e);
    }
    ev = marks_[size_t(k)];
  }
  // Re-recording a mark is safe once the comm thread has queued its wait for the previous
  // recording: cudaStreamWaitEvent takes the event's state at the time of the call.
  LOOM_CUDA_CHECK(cudaEventRecord(ev, stream()));
}

void CudaBackend::enter_side(int after_mark) {
  LOOM_CHECK(side_of_this_thread() == nullptr,
             "enter_side: this thread is on a side stream already");
  bind();
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(marks_mu_);
    LOOM_CHECK(after_mark >= 0 && size_t(after_mark) < marks_.size(),
               "enter_side after mark {}, which was never recorded", after_mark);
    ev = marks_[size_t(after_mark)];
  }
  LOOM_CUDA_CHECK(cudaStreamWaitEvent(comm_, ev, 0));
  side_of_this_thread() = this;
}

void CudaBackend::leave_side() {
  if (side_of_this_thread() == this) side_of_this_thread() = nullptr;
}

// ---- memory ----

void* CudaBackend::allocate(size_t bytes) {
  bind();
  void* p = pool_.allocate(bytes);
  // The interface promises zeroed memory; zero in the compute stream's order (the pool's) so
  // a recycled block is not cleared while an earlier kernel still reads it.
  LOOM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, compute_));
  if (on_side_stream()) comm_wait_for_compute();
  return p;
}

void CudaBackend::deallocate(void* p) {
  if (!p) return;
  if (on_side_stream()) compute_wait_for_comm();
  pool_.deallocate(p);
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  if (bytes > kStageMaxBytes) {
    // From pageable memory the call returns once the source has been staged, so the caller
    // may reuse host_src at once; but the driver first waits for the stream to drain.
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
    return;
  }
  // The pinned staging ring: copy into a pinned slot (the host returns at once, and may reuse
  // host_src), then a truly asynchronous DMA in stream order, so a training step's batch
  // upload does not wait for the previous step's kernels. A slot is reused after its last
  // copy finished (its event); two slots, so the batch and its labels alternate.
  std::lock_guard<std::mutex> lock(staging_mu_);
  Staging& st = staging_[staging_next_];
  staging_next_ = (staging_next_ + 1) % kStagingSlots;
  if (st.done) {
    LOOM_CUDA_CHECK(cudaEventSynchronize(st.done));
  } else {
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
  }
  if (st.bytes < bytes) {
    if (st.host) LOOM_CUDA_CHECK(cudaFreeHost(st.host));
    st.host = nullptr;
    st.bytes = 0;
    LOOM_CUDA_CHECK(cudaHostAlloc(&st.host, bytes, cudaHostAllocDefault));
    st.bytes = bytes;
  }
  std::memcpy(st.host, host_src, bytes);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, st.host, bytes, cudaMemcpyHostToDevice, stream()));
  LOOM_CUDA_CHECK(cudaEventRecord(st.done, stream()));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  bind();
  const cudaStream_t s = stream();
  LOOM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, s));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  bind();
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                            int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  bind();
  LOOM_CUDA_CHECK(cudaMemcpy2DAsync(
      dst, size_t(dst_stride) * sizeof(float), src, size_t(src_stride) * sizeof(float),
      size_t(cols) * sizeof(float), size_t(rows), cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::fill(float* x, int64_t n, float value) {
  bind();
  cuda::fill(stream(), x, n, value);
}

void CudaBackend::synchronize() {
  bind();
  LOOM_CUDA_CHECK(cudaStreamSynchronize(compute_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(comm_));
}

// ---- dense algebra ----

std::string CudaBackend::matmul_precision_unsupported(Precision p) const {
  switch (p) {
    case Precision::kFp32:
    case Precision::kFp16:
      return "";
    case Precision::kBf16:
      if (sm_ < 80)
        return fmt::format(
            "this GPU ({}) is sm_{}; bf16 matrix products need sm_80 (Ampere) or later",
            device_label_, sm_);
      return "";
  }
  return "unknown precision";
}

void CudaBackend::low_precision_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                     float alpha, const float* a, int64_t lda, int64_t stride_a,
                                     const float* b, int64_t ldb, int64_t stride_b, float beta,
                                     float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const bool bf16 = matmul_precision() == Precision::kBf16;
  const cuda::LowFormat format = bf16 ? cuda::LowFormat::kBf16 : cuda::LowFormat::kFp16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  // The operands as stored (row-major): A is [m, k] or, transposed, [k, m]; B [k, n] or [n, k].
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const auto aligned = [](int64_t values) { return (size_t(values) * 2 + 255) / 256 * 256; };
  const size_t a_bytes = aligned(batch * a_rows * a_cols);
  char* low = static_cast<char*>(low_scratch(a_bytes + aligned(batch * b_rows * b_cols)));
  cuda::round_matrices(stream(), format, a, batch, a_rows, a_cols, lda, stride_a, low);
  cuda::round_matrices(stream(), format, b, batch, b_rows, b_cols, ldb, stride_b, low + a_bytes);
  // Packed copies: each matrix's leading dimension is its column count. Row-major to
  // column-major as in gemm(): operands swapped, m with n.
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    LOOM_CUDA_CHECK(cublasGemmEx_64(cublas(), op_b, op_a, n, m, k, &alpha, low + a_bytes, type,
                                    b_cols, low, type, a_cols, &beta, c, CUDA_R_32F, ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    LOOM_CUDA_CHECK(cublasGemmStridedBatchedEx_64(
        cublas(), op_b, op_a, n, m, k, &alpha, low + a_bytes, type, b_cols, b_rows * b_cols, low,
        type, a_cols, a_rows * a_cols, &beta, c, CUDA_R_32F, ldc, stride_c, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                       float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  bind();
  // An empty product (k = 0) keeps cublasSgemm's handling (C = beta C) in every precision.
  if (matmul_precision() != Precision::kFp32 && k > 0) {
    low_precision_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
    return;
  }
  // cuBLAS is column-major. A row-major matrix is the column-major view of its transpose, so
  // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands (and
  // m with n) and keep each one's transpose flag.
  LOOM_CUDA_CHECK(cublasSgemm_64(cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                 lda, &beta, c, ldc));
}

void CudaBackend::add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
  bind();
  cuda::add_bias(stream(), y, bias, rows, cols);
}

void CudaBackend::sum_rows(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  bind();
  auto* ws = static_cast<float*>(
      scratch(sizeof(float) * size_t(cuda::sum_rows_workspace_floats(rows, cols))));
  cuda::sum_rows(stream(), dy, dbias, rows, cols, ws);
}

void CudaBackend::add_channel_bias(float* y, const float* bias, int64_t channels, int64_t plane) {
  bind();
  cuda::add_channel_bias(stream(), y, bias, channels, plane);
}

void CudaBackend::accumulate_channel_sums(const float* dy, float* dbias, int64_t channels,
                                          int64_t plane) {
  bind();
  cuda::accumulate_channel_sums(stream(), dy, dbias, channels, plane);
}

void CudaBackend::axpy(int64_t n, float alpha, const float* x, float* y) {
  bind();
  cuda::axpy(stream(), n, alpha, x, y);
}

void CudaBackend::scale(int64_t n, float alpha, float* x) {
  bind();
  cuda::scale(stream(), n, alpha, x);
}

// ---- activations ----

void CudaBackend::relu_forward(const float* x, float* y, int64_t n) {
  bind();
  cuda::relu_forward(stream(), x, y, n);
}

void CudaBackend::relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  bind();
  cuda::relu_backward(stream(), y, dy, dx, n);
}

void CudaBackend::dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p,
                                  uint64_t key, uint64_t first_index) {
  bind();
  // Both exactly as CpuBackend::dropout_forward computes them.
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const uint32_t threshold = uint32_t(std::ceil(double(p) * 16777216.0));
  cuda::dropout_forward(stream(), x, y, mask, n, threshold, keep_scale, key, first_index);
}

void CudaBackend::dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n,
                                   float p) {
  bind();
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  cuda::dropout_backward(stream(), dy, mask, dx, n, keep_scale);
}

static_assert(int(Activation::kRelu) == 0 && int(Activation::kLeakyRelu) == 1 &&
                  int(Activation::kGelu) == 2 && int(Activation::kSilu) == 3 &&
                  int(Activation::kTanh) == 4 && int(Activation::kSigmoid) == 5 &&
                  int(Activation::kRelu6) == 6 && int(Activation::kHardSigmoid) == 7 &&
                  int(Activation::kHardSwish) == 8,
              "kernels.h numbers the activations as loom::Activation does");

void CudaBackend::activation_forward(Activation kind, float alpha, const float* x, float* y,
                                     int64_t n) {
  if (int(kind) < 0 || int(kind) > int(Activation::kHardSwish))
    throw Error(fmt::format("activation_forward: unknown activation {}", int(kind)));
  bind();
  cuda::activation_forward(stream(), int(kind), alpha, x, y, n);
}

void CudaBackend::activation_backward(Activation kind, float alpha, const float* x, const float* y,
                                      const float* dy, float* dx, int64_t n) {
  if (int(kind) < 0 || int(kind) > int(Activation::kHardSwish))
    throw Error(fmt::format("activation_backward: unknown activation {}", int(kind)));
  bind();
  cuda::activation_backward(stream(), int(kind), alpha, x, y, dy, dx, n);
}

// ---- loss ----

double CudaBackend::softmax_xent(const float* logits, const int32_t* labels, int64_t rows,
                                 int64_t cols, float grad_scale, float* dlogits, int64_t* correct,
                                 float label_smoothing) {
  if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
    throw InputError(fmt::format("label smoothing {} is outside [0, 1]", label_smoothing));
  if (rows <= 0) {
    if (correct) *correct = 0;
    return 0.0;
  }
  LOOM_CHECK_GT(cols, 0);
  bind();
  // Scratch: per-row loss and correct flags, then the two sums.
  auto* ws = static_cast<double*>(scratch(sizeof(double) * size_t(2 * rows + 2)));
  cuda::softmax_xent_rows(stream(), logits, labels, rows, cols, grad_scale, label_smoothing,
                          dlogits, ws, ws + rows);
  cuda::reduce_loss(stream(), ws, ws + rows, rows, ws + 2 * rows);
  double out[2];
  std::memcpy(out, read_back(ws + 2 * rows, sizeof(out)), sizeof(out));
  // A label outside [0, cols) makes its row's loss NaN on the device; find it only then, and
  // report it as the CPU backend does.
  if (std::isnan(out[0])) {
    std::vector<int32_t> host(static_cast<size_t>(rows));
    copy_to_host(host.data(), labels, host.size() * sizeof(int32_t));
    for (int64_t r = 0; r < rows; ++r)
      if (host[size_t(r)] < 0 || host[size_t(r)] >= cols)
        throw InputError(
            fmt::format("label {} of row {} is outside the {} classes", host[size_t(r)], r, cols));
  }
  if (correct) *correct = int64_t(out[1]);
  return out[0];
}

double CudaBackend::mse(const float* y, const float* target, int64_t rows, int64_t cols,
                        float grad_scale, float* dy) {
  if (rows <= 0) return 0.0;
  LOOM_CHECK_GT(cols, 0);
  bind();
  auto* ws = static_cast<double*>(scratch(sizeof(double) * size_t(rows + 2)));
  cuda::mse_rows(stream(), y, target, rows, cols, grad_scale, dy, ws);
  // reduce_loss sums two per-row arrays; the second sum (of the same losses) is not used.
  cuda::reduce_loss(stream(), ws, ws, rows, ws + rows);
  double out[2];
  std::memcpy(out, read_back(ws + rows, sizeof(out)), sizeof(out));
  return out[0];
}

int64_t CudaBackend::count_correct(const float* logits, const int32_t* labels, int64_t rows,
                                   int64_t cols) {
  int64_t right = 0;
  if (rows <= 0) return 0;
  LOOM_CHECK_GT(cols, 0);
  bind();
  auto* ws = static_cast<double*>(scratch(sizeof(double) * size_t(2 * rows + 2)));
  cuda::softmax_xent_rows(stream(), logits, labels, rows, cols, 1.0f, 0.0f, nullptr, ws, ws + rows);
  cuda::reduce_loss(stream(), ws, ws + rows, rows, ws + 2 * rows);
  double out[2];
  std::memcpy(out, read_back(ws + 2 * rows, sizeof(out)), sizeof(out));
  right = int64_t(out[1]);
  return right;
}

// ---- convolution helpers ----

void CudaBackend::im2col(const float* image, int64_t channels, int64_t height, int64_t width,
                         int64_t kernel, int64_t pad, int64_t stride, float* columns) {
  bind();
  cuda::im2col(stream(), image, channels, height, width, kernel, pad, stride, columns);
}

void CudaBackend::col2im(const float* columns, int64_t channels, int64_t height, int64_t width,
                         int64_t kernel, int64_t pad, int64_t stride, float* image) {
  bind();
  cuda::col2im(stream(), columns, channels, height, width, kernel, pad, stride, image);
}

void CudaBackend::maxpool_forward(const float* x, float* y, int32_t* argmax, int64_t planes,
                                  int64_t h, int64_t w, int64_t size) {
  bind();
  cuda::maxpool_forward(stream(), x, y, argmax, planes, h, w, size);
}

void CudaBackend::maxpool_backward(const float* dy, const int32_t* argmax, float* dx,
                                   int64_t planes, int64_t h, int64_t w, int64_t size) {
  bind();
  cuda::maxpool_backward(stream(), dy, argmax, dx, planes, h, w, size);
}

// ---- convolution and pooling over a batch ----

namespace {

cuda::ConvDims dims(const ConvGeometry& g) {
  return {g.batch, g.in_c,       g.in_h,       g.in_w,     g.out_c,    g.out_h,
          g.out_w, g.kernel_h,   g.kernel_w,   g.stride_h, g.stride_w, g.pad_h,
          g.pad_w, g.dilation_h, g.dilation_w, g.groups};
}

cuda::PoolDims dims(const PoolGeometry& g) {
  return {g.planes,   g.in_h,     g.in_w,     g.out_h, g.out_w, g.kernel_h,
          g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w};
}

// The per-group shape of a convolution's GEMMs, checked.
struct ConvGemm {
  int64_t cin_g, cout_g, rows_g, cols;  // rows_g = cin_g kernel_h kernel_w, cols = out_h out_w
  bool direct;  // 1x1, stride 1, unpadded: the image is its own column matrix
};

ConvGemm conv_gemm(const ConvGeometry& g) {
  LOOM_CHECK(g.groups >= 1 && g.in_c % g.groups == 0 && g.out_c % g.groups == 0,
             "conv2d: {} groups do not divide {} input and {} output channels", g.groups, g.in_c,
             g.out_c);
  LOOM_CHECK(g.kernel_h >= 1 && g.kernel_w >= 1 && g.stride_h >= 1 && g.stride_w >= 1 &&
                 g.dilation_h >= 1 && g.dilation_w >= 1 && g.pad_h >= 0 && g.pad_w >= 0,
             "conv2d: bad geometry (kernel {}x{}, stride {}x{}, dilation {}x{}, padding {}x{})",
             g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.pad_h,
             g.pad_w);
  ConvGemm c{};
  c.cin_g = g.in_c / g.groups;
  c.cout_g = g.out_c / g.groups;
  c.rows_g = c.cin_g * g.kernel_h * g.kernel_w;
  c.cols = g.out_h * g.out_w;
  c.direct = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
             g.pad_h == 0 && g.pad_w == 0 && g.out_h == g.in_h && g.out_w == g.in_w;
  return c;
}

}  // namespace

void CudaBackend::conv2d_forward(const ConvGeometry& g, const float* x, const float* w,
                                 const float* bias, float* y) {
  const ConvGemm c = conv_gemm(g);
  if (g.batch <= 0 || g.out_c <= 0 || c.cols <= 0) return;
  bind();
  if (cuda::CudnnConv* dnn = cudnn_for_call();
      dnn && dnn->forward(cudnn_lane(), g, x, w, bias, y, matmul_precision()))
    return;
  const cuda::ConvDims d = dims(g);
  float* columns =
      c.direct ? nullptr
               : static_cast<float*>(scratch(sizeof(float) * size_t(g.groups * c.rows_g * c.cols)));
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* image = x + n * g.in_c * g.in_h * g.in_w;
    if (!c.direct) cuda::conv_im2col(stream(), d, image, columns);
    const float* col = c.direct ? image : columns;
    for (int64_t k = 0; k < g.groups; ++k)
      // y[n, group k] = W_k [cout_g, rows_g] x columns_k [rows_g, cols]
      gemm(false, false, c.cout_g, c.cols, c.rows_g, 1.0f, w + k * c.cout_g * c.rows_g, c.rows_g,
           col + k * c.rows_g * c.cols, c.cols, 0.0f, y + (n * g.out_c + k * c.cout_g) * c.cols,
           c.cols);
  }
  if (bias) cuda::conv_add_bias(stream(), y, bias, g.batch, g.out_c, c.cols);
}

void CudaBackend::conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                                       float* dx) {
  const ConvGemm c = conv_gemm(g);
  if (g.batch <= 0 || g.in_c * g.in_h * g.in_w <= 0) return;
  bind();
  if (g.out_c <= 0 || c.cols <= 0) {
    cuda::fill(stream(), dx, g.batch * g.in_c * g.in_h * g.in_w, 0.0f);
    return;
  }
  if (cuda::CudnnConv* dnn = cudnn_for_call();
      dnn && dnn->backward_data(cudnn_lane(), g, w, dy, dx, matmul_precision()))
    return;
  const cuda::ConvDims d = dims(g);
  float* dcolumns =
      c.direct ? nullptr
               : static_cast<float*>(scratch(sizeof(float) * size_t(g.groups * c.rows_g * c.cols)));
  for (int64_t n = 0; n < g.batch; ++n) {
    float* image = dx + n * g.in_c * g.in_h * g.in_w;
    float* dcol = c.direct ? image : dcolumns;
    for (int64_t k = 0; k < g.groups; ++k)
      // dcolumns_k [rows_g, cols] = W_k^T [rows_g, cout_g] x dy[n, group k] [cout_g, cols]
      gemm(true, false, c.rows_g, c.cols, c.cout_g, 1.0f, w + k * c.cout_g * c.rows_g, c.rows_g,
           dy + (n * g.out_c + k * c.cout_g) * c.cols, c.cols, 0.0f, dcol + k * c.rows_g * c.cols,
           c.cols);
    if (!c.direct) cuda::conv_col2im(stream(), d, dcolumns, image);
  }
}

void CudaBackend::conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy,
                                          float* dw, float* dbias) {
  const ConvGemm c = conv_gemm(g);
  bind();
  if (g.batch <= 0 || c.cols <= 0) {
    cuda::fill(stream(), dw, g.out_c * c.rows_g, 0.0f);
    if (dbias) cuda::fill(stream(), dbias, g.out_c, 0.0f);
    return;
  }
  if (cuda::CudnnConv* dnn = cudnn_for_call();
      dnn && dnn->backward_weights(cudnn_lane(), g, x, dy, dw, dbias, matmul_precision()))
    return;
  const cuda::ConvDims d = dims(g);
  float* columns =
      c.direct ? nullptr
               : static_cast<float*>(scratch(sizeof(float) * size_t(g.groups * c.rows_g * c.cols)));
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* image = x + n * g.in_c * g.in_h * g.in_w;
    if (!c.direct) cuda::conv_im2col(stream(), d, image, columns);
    const float* col = c.direct ? image : columns;
    for (int64_t k = 0; k < g.groups; ++k)
      // dW_k [cout_g, rows_g] (+)= dy[n, group k] [cout_g, cols] x columns_k^T [cols, rows_g]
      gemm(false, true, c.cout_g, c.rows_g, c.cols, 1.0f,
           dy + (n * g.out_c + k * c.cout_g) * c.cols, c.cols, col + k * c.rows_g * c.cols, c.cols,
           n == 0 ? 0.0f : 1.0f, dw + k * c.cout_g * c.rows_g, c.rows_g);
  }
  if (dbias) cuda::conv_bias_grad(stream(), dy, dbias, g.batch, g.out_c, c.cols);
}

void CudaBackend::maxpool2d_forward(const PoolGeometry& g, const float* x, float* y,
                                    int32_t* argmax) {
  bind();
  cuda::maxpool2d_forward(stream(), dims(g), x, y, argmax);
}

void CudaBackend::maxpool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax,
                                     float* dx) {
  bind();
  cuda::maxpool2d_backward(stream(), dims(g), dy, argmax, dx);
}

void CudaBackend::avgpool2d_forward(const PoolGeometry& g, bool count_include_pad, const float* x,
                                    float* y) {
  bind();
  cuda::avgpool2d_forward(stream(), dims(g), count_include_pad, x, y);
}

void CudaBackend::avgpool2d_backward(const PoolGeometry& g, bool count_include_pad, const float* dy,
                                     float* dx) {
  bind();
  cuda::avgpool2d_backward(stream(), dims(g), count_include_pad, dy, dx);
}

// ---- batch normalisation ----

void CudaBackend::channel_moments(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                  const float* shift, float* sum, float* sumsq) {
  bind();
  cuda::channel_moments(stream(), x, batch, channels, plane, shift, sum, sumsq);
}

void CudaBackend::batchnorm_forward(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                    const float* mean, const float* var, float eps,
                                    const float* gamma, const float* beta, float* y) {
  bind();
  cuda::batchnorm_forward(stream(), x, batch, channels, plane, mean, var, eps, gamma, beta, y);
}

void CudaBackend::batchnorm_backward_reduce(const float* x, const float* dy, int64_t batch,
                                            int64_t channels, int64_t plane, const float* mean,
                                            const float* var, float eps, float* sum_dy,
                                            float* sum_dy_xhat) {
  bind();
  cuda::batchnorm_backward_reduce(stream(), x, dy, batch, channels, plane, mean, var, eps, sum_dy,
                                  sum_dy_xhat);
}

void CudaBackend::batchnorm_backward_data(const float* x, const float* dy, int64_t batch,
                                          int64_t channels, int64_t plane, const float* mean,
                                          const float* var, float eps, const float* gamma,
                                          const float* sum_dy, const float* sum_dy_xhat,
                                          double count, float* dx) {
  bind();
  cuda::batchnorm_backward_data(stream(), x, dy, batch, channels, plane, mean, var, eps, gamma,
                                sum_dy, sum_dy_xhat, count, dx);
}

// ---- optimizers ----

void CudaBackend::sgd_update(float* p, const float* g, float* v, int64_t n, float lr,
                             float momentum, float weight_decay, bool nesterov) {
  bind();
  cuda::sgd_update(stream(), p, g, v, n, lr, momentum, weight_decay, nesterov);
}

void CudaBackend::adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay,
                              bool decoupled, int64_t t) {
  bind();
  // The scalars exactly as CpuBackend::adam_update computes them.
  const float c1 = 1.0f / (1.0f - std::pow(beta1, float(t)));
  const float c2 = 1.0f / (1.0f - std::pow(beta2, float(t)));
  const float l2 = decoupled ? 0.0f : weight_decay;
  const float shrink = decoupled ? 1.0f - lr * weight_decay : 1.0f;
  cuda::adam_update(stream(), p, g, m, v, n, lr, beta1, beta2, eps, l2, shrink, c1, c2);
}

bool CudaBackend::has_non_finite(const float* x, int64_t n) {
  if (n <= 0) return false;
  bind();
  auto* flag = static_cast<int*>(scratch(sizeof(int)));
  LOOM_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream()));
  cuda::find_non_finite(stream(), x, n, flag);
  int found = 0;
  std::memcpy(&found, read_back(flag, sizeof(int)), sizeof(int));
  return found != 0;
}

void CudaBackend::note_non_finite(const float* x, int64_t n, float* flag) {
  if (n <= 0) return;
  bind();
  cuda::mark_non_finite(stream(), x, n, flag);
}

// ---- sequence models ----

int64_t CudaBackend::embedding_forward(const float* ids, const float* table, int64_t n,
                                       int64_t vocab, int64_t dim, float* y) {
  if (n <= 0) return -1;
  bind();
  auto* first_bad = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  const unsigned long long none = ~0ull;  // every byte 0xff
  LOOM_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(none), stream()));
  cuda::embedding_forward(stream(), ids, table, n, vocab, dim, y, first_bad);
  unsigned long long bad = 0;
  std::memcpy(&bad, read_back(first_bad, sizeof(bad)), sizeof(bad));
  return bad == none ? -1 : int64_t(bad);
}

void CudaBackend::embedding_backward(const float* ids, const float* dy, int64_t n, int64_t vocab,
                                     int64_t dim, float* dtable) {
  bind();
  cuda::embedding_backward(stream(), ids, dy, n, vocab, dim, dtable);
}

void CudaBackend::layernorm_forward(const float* x, int64_t rows, int64_t cols, float eps,
                                    const float* gamma, const float* beta, float* y, float* mean,
                                    float* rstd) {
  bind();
  cuda::layernorm_forward(stream(), x, rows, cols, eps, gamma, beta, y, mean, rstd);
}

void CudaBackend::layernorm_backward(const float* x, const float* dy, int64_t rows, int64_t cols,
                                     const float* gamma, const float* mean, const float* rstd,
                                     float* dx, float* dgamma, float* dbeta) {
  bind();
  cuda::layernorm_backward(stream(), x, dy, rows, cols, gamma, mean, rstd, dx, dgamma, dbeta);
}

void CudaBackend::gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const float* a, int64_t lda, int64_t stride_a,
                               const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                               int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  bind();
  if (matmul_precision() != Precision::kFp32 && k > 0) {
    low_precision_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                       c, ldc, stride_c, batch);
    return;
  }
  // Row-major to column-major as in gemm(): operands swapped, m with n.
  LOOM_CUDA_CHECK(cublasSgemmStridedBatched_64(
      cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
      &alpha, b, ldb, stride_b, a, lda, stride_a, &beta, c, ldc, stride_c, batch));
}

void CudaBackend::causal_softmax_forward(const float* x, float* y, int64_t blocks, int64_t t) {
  bind();
  cuda::softmax_rows(stream(), x, y, blocks * t, t, true);
}

void CudaBackend::causal_softmax_backward(const float* y, const float* dy, float* dx,
                                          int64_t blocks, int64_t t) {
  bind();
  cuda::softmax_rows_backward(stream(), y, dy, dx, blocks * t, t, true);
}

void CudaBackend::softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
  bind();
  cuda::softmax_rows(stream(), x, y, rows, cols, false);
}

void CudaBackend::softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                   int64_t cols) {
  bind();
  cuda::softmax_rows_backward(stream(), y, dy, dx, rows, cols, false);
}

void CudaBackend::permute(const float* x, float* y, int64_t blocks, const Permutation& p) {
  static_assert(int(cuda::PermutedAxes::kMaxRank) == int(Permutation::kMaxRank));
  cuda::PermutedAxes axes;
  axes.rank = p.rank;
  for (int i = 0; i < p.rank; ++i) {
    axes.size[i] = p.result_dim(i);
    axes.stride[i] = p.source_stride(i);
  }
  bind();
  cuda::permute(stream(), x, y, blocks, axes);
}

void CudaBackend::scale_rows(const float* x, const float* s, float* y, int64_t rows, int64_t cols) {
  bind();
  cuda::scale_rows(stream(), x, s, y, rows, cols);
}

void CudaBackend::row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t cols) {
  bind();
  cuda::row_dots(stream(), a, b, out, rows, cols);
}

double CudaBackend::softmax_xent_ignore(const float* logits, const int32_t* labels, int64_t rows,
                                        int64_t cols, float grad_scale, float* dlogits,
                                        int64_t* correct, float label_smoothing,
                                        int32_t ignore_index, int64_t* counted) {
  if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
    throw InputError(fmt::format("label smoothing {} is outside [0, 1]", label_smoothing));
  if (rows <= 0) {
    if (correct) *correct = 0;
    if (counted) *counted = 0;
    return 0.0;
  }
  LOOM_CHECK_GT(cols, 0);
  bind();
  // Scratch: per-row loss, correct and counted flags, then (loss, correct) and (counted, -).
  auto* ws = static_cast<double*>(scratch(sizeof(double) * size_t(3 * rows + 4)));
  double *loss = ws, *right = ws + rows, *count = ws + 2 * rows, *sums = ws + 3 * rows;
  cuda::softmax_xent_rows(stream(), logits, labels, rows, cols, grad_scale, label_smoothing,
                          dlogits, loss, right);
  cuda::clear_ignored_rows(stream(), labels, rows, cols, ignore_index, dlogits, loss, right, count);
  cuda::reduce_loss(stream(), loss, right, rows, sums);
  cuda::reduce_loss(stream(), count, count, rows, sums + 2);
  double out[4];
  std::memcpy(out, read_back(sums, sizeof(out)), sizeof(out));
  // A label outside [0, cols) that is not the ignored one leaves its row's loss NaN.
  if (std::isnan(out[0])) {
    std::vector<int32_t> host(static_cast<size_t>(rows));
    copy_to_host(host.data(), labels, host.size() * sizeof(int32_t));
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t l = host[size_t(r)];
      if (l != ignore_index && (l < 0 || l >= cols))
        throw InputError(
            fmt::format("label {} of row {} is outside the {} classes (and is not "
                        "the ignored label {})",
                        l, r, cols, ignore_index));
    }
  }
  if (correct) *correct = int64_t(out[1]);
  if (counted) *counted = int64_t(out[2]);
  return out[0];
}

}  // namespace loom
