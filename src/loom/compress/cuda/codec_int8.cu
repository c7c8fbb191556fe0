// int8 dynamic tree on the device (compress/int8_codec.h has the format and the reference).
// Bit for bit the CPU's: the same float operations in the same order, each written as an
// explicitly rounded intrinsic (__fmul_rn, __fadd_rn, ...) so nvcc cannot fuse a multiply and
// an add into one FMA, which the CPU reference (g++ in ISO mode) never does. The 256-entry
// table is rebuilt in shared memory by every thread block with the reference's formula.
#include "loom/compress/cuda/codec_kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {
namespace {

constexpr int kInt8Threads = 256;  // one thread per table entry while building it

__device__ __forceinline__ float inv_scale(int e) {  // 10^-e, e = 0..6 (the reference's floats)
  const float v[7] = {1e0f, 1e-1f, 1e-2f, 1e-3f, 1e-4f, 1e-5f, 1e-6f};
  return v[e];
}
__device__ __forceinline__ float scale(int e) {
  const float v[7] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f};
  return v[e];
}

// int8_codec.cc's build_table(): entry mi (1..127) is level e = 6 - floor(log2 mi), step
// q = mi - m_e + 1 of m_e = 64 >> e, magnitude (0.1 + q * (0.9 / m_e)) * 10^-e; bit 7 the sign.
__device__ void build_table(float* table) {
  const int c = threadIdx.x;  // blockDim.x == 256
  const int mi = c & 127;
  float mag = 0.0f;
  if (mi != 0) {
    const int e = 6 - (31 - __clz(mi));
    const int m = 64 >> e;
    const float step = __fdiv_rn(0.9f, float(m));
    mag = __fmul_rn(__fadd_rn(0.1f, __fmul_rn(float(mi - m + 1), step)), inv_scale(e));
  }
  table[c] = (c & 0x80) ? -mag : mag;  // code 0x80 is -0
  __syncthreads();
}

// encode_one_ref: the code of s for 1 / absmax = inv.
__device__ __forceinline__ unsigned encode_one(float s, float inv, float inv_step) {
  const float a = fminf(__fmul_rn(fabsf(s), inv), 1.0f);
  int e = 0;
  e += a <= 1e-1f;
  e += a <= 1e-2f;
  e += a <= 1e-3f;
  e += a <= 1e-4f;
  e += a <= 1e-5f;
  e += a <= 1e-6f;
  const float cnt = float(64 >> e);  // m_e; level 6 has m_e = 1
  const float t = __fmul_rn(a, scale(e));
  float q = rintf(__fmul_rn(__fmul_rn(__fsub_rn(t, 0.1f), inv_step), cnt));
  q = fminf(fmaxf(q, 0.0f), cnt);
  const unsigned mi = unsigned(int(__fadd_rn(q, cnt - 1.0f)));
  return mi | ((__float_as_uint(s) >> 31) << 7);
}

__device__ __forceinline__ bool non_finite(float f) {
  return (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u;
}

// One thread block per codec block: s = g + r and the absolute maximum, then 4 codes per
// thread (one 32-bit store; past n they are the zero padding).
__global__ void int8_encode_kernel(const float* g, float* r, int64_t n, int64_t block,
                                   float* absmax, uint8_t* codes, int* bad) {
  __shared__ float table[256];
  __shared__ float warp_max[kInt8Threads / 32];
  build_table(table);
  const int64_t b0 = int64_t(blockIdx.x) * block;
  const int64_t b1 = b0 + block < n ? b0 + block : n;
  float amax = 0.0f;
  bool any_bad = false;
  for (int64_t i = b0 + threadIdx.x; i < b1; i += blockDim.x) {
    const float s = __fadd_rn(g[i], r[i]);
    any_bad |= non_finite(s);
    r[i] = s;
    amax = fmaxf(amax, fabsf(s));  // max is exact in any order
  }
  if (any_bad) *bad = 1;
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();  // also orders every thread's r writes before the reads below
  amax = 0.0f;
  for (int w = 0; w < kInt8Threads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  if (threadIdx.x == 0) absmax[blockIdx.x] = amax;
  const float inv = amax > 0.0f ? __fdiv_rn(1.0f, amax) : 0.0f;
  const float inv_step = __fdiv_rn(1.0f, 0.9f);
  const int64_t padded_end = b0 + ((b1 - b0 + 3) & ~int64_t(3));
  for (int64_t q = b0 + 4 * int64_t(threadIdx.x); q < padded_end; q += 4 * int64_t(blockDim.x)) {
    uint32_t word = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = q + k;
      if (i >= b1) break;
      const float s = r[i];
      const unsigned c = encode_one(s, inv, inv_step);
      r[i] = __fsub_rn(s, __fmul_rn(table[c], amax));
      word |= uint32_t(c) << (8 * k);
    }
    *reinterpret_cast<uint32_t*>(codes + q) = word;  // b0 and q are multiples of 4
  }
}

__global__ void int8_decode_kernel(const float* absmax, const uint8_t* codes, int64_t n,
                                   int64_t block, float* out, bool accumulate) {
  __shared__ float table[256];
  build_table(table);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = __fmul_rn(table[codes[i]], absmax[i / block]);
    out[i] = accumulate ? __fadd_rn(out[i], v) : v;
  }
}

}  // namespace

int64_t int8_encoded_bytes(int64_t n, int64_t block) {
  const int64_t blocks = (n + block - 1) / block;
  return (blocks * 4 + n + 3) / 4 * 4;
}

void int8_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t block, void* out,
                 int* bad) {
  if (n <= 0) return;
  const int64_t blocks = (n + block - 1) / block;
  auto* absmax = static_cast<float*>(out);
  auto* codes = reinterpret_cast<uint8_t*>(absmax + blocks);
  launch_kernel(int8_encode_kernel, s, dim3(unsigned(blocks)), dim3(kInt8Threads), 0, g, r, n,
                block, absmax, codes, bad);
}

void int8_decode(cudaStream_t s, const void* in, int64_t n, int64_t block, float* out,
                 bool accumulate) {
  if (n <= 0) return;
  const int64_t blocks = (n + block - 1) / block;
  const auto* absmax = static_cast<const float*>(in);
  const auto* codes = reinterpret_cast<const uint8_t*>(absmax + blocks);
  launch_kernel(int8_decode_kernel, s, dim3(blocks_for(n, kInt8Threads)), dim3(kInt8Threads), 0,
                absmax, codes, n, block, out, accumulate);
}

}  // namespace loom::cuda
