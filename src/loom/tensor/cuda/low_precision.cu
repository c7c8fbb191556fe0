// Rounding fp32 operands to bf16 or fp16 for the matrix products (CudaBackend::gemm and
// gemm_batched, the cuDNN convolutions in low precision), back to fp32, and the loss scaler's
// overflow flag. Rounding is to nearest even (__float2bfloat16_rn, __float2half_rn), as the
// CPU backend's oneDNN reorders round; fp16 values past its range become Inf, which is what
// the loss scaler looks for.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

void round_matrices(cudaStream_t s, LowFormat format, const float* src, int64_t batch, int64_t rows,
                    int64_t cols, int64_t ld, int64_t stride, void* dst) {
  const int64_t per = rows * cols, n = batch * per;
  if (format == LowFormat::kBf16) {
    auto* out = static_cast<__nv_bfloat16*>(dst);
    launch_1d(s, n, [=] __device__(int64_t i) {
      const int64_t b = i / per, r = (i % per) / cols, c = i % cols;
      out[i] = __float2bfloat16_rn(src[b * stride + r * ld + c]);
    });
  } else {
    auto* out = static_cast<__half*>(dst);
    launch_1d(s, n, [=] __device__(int64_t i) {
      const int64_t b = i / per, r = (i % per) / cols, c = i % cols;
      out[i] = __float2half_rn(src[b * stride + r * ld + c]);
    });
  }
}

void widen(cudaStream_t s, LowFormat format, const void* src, int64_t n, float* dst) {
  if (format == LowFormat::kBf16) {
    const auto* in = static_cast<const __nv_bfloat16*>(src);
    launch_1d(s, n, [=] __device__(int64_t i) { dst[i] = __bfloat162float(in[i]); });
  } else {
    const auto* in = static_cast<const __half*>(src);
    launch_1d(s, n, [=] __device__(int64_t i) { dst[i] = __half2float(in[i]); });
  }
}

void mark_non_finite(cudaStream_t s, const float* x, int64_t n, float* flag) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(x);
  launch_1d(s, n, [=] __device__(int64_t i) {
    if ((bits[i] & 0x7f800000u) == 0x7f800000u) *flag = 1.0f;
  });
}

}  // namespace loom::cuda
