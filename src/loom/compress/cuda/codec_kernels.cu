// Codec kernels (see codec_kernels.h). Each reproduces its CPU reference's arithmetic exactly:
// the same single-rounding sum s = g + r, the same clamps and round-to-nearest-even
// conversions, and for 1-bit the same 16 interleaved partial sums per side combined in the same
// order.
#include <cuda_fp16.h>

#include "loom/compress/cuda/codec_kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

struct OnebitLevels {
  float neg, pos;
};
static_assert(sizeof(OnebitLevels) == 8, "layout of compress::OnebitLevels");

constexpr float kHalfMax = 65504.0f;
constexpr uint32_t kBf16MaxBits = 0x7f7f0000u;

__device__ __forceinline__ bool non_finite(float f) {
  return (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u;
}

// std::min(std::max(s, -m), m), NaN propagation included.
__device__ __forceinline__ float clamp_like_cpu(float s, float m) {
  const float lo = s < -m ? -m : s;
  return m < lo ? m : lo;
}

__device__ __forceinline__ uint16_t to_half(float s) {
  return __half_as_ushort(__float2half_rn(clamp_like_cpu(s, kHalfMax)));
}
__device__ __forceinline__ float from_half(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

// half.h's float_to_bf16_ref: the top 16 bits, rounded to nearest even.
__device__ __forceinline__ uint16_t to_bf16(float s) {
  uint32_t x = __float_as_uint(clamp_like_cpu(s, __uint_as_float(kBf16MaxBits)));
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}
__device__ __forceinline__ float from_bf16(uint16_t b) {
  return __uint_as_float(uint32_t(b) << 16);
}

template <bool kBf16>
void half_encode(cudaStream_t s, const float* g, float* r, int64_t n, uint16_t* out, int* bad) {
  if (n <= 0) return;
  // Two elements per thread: one 4-byte store of the packed pair, and the zero pad of an odd n
  // written by the thread that owns the last pair.
  launch_1d(s, (n + 1) / 2, [=] __device__(int64_t q) {
    const int64_t i = 2 * q;
    uint16_t h[2] = {0, 0};
    bool any_bad = false;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (i + k >= n) break;
      const float v = g[i + k] + r[i + k];
      any_bad |= non_finite(v);
      h[k] = kBf16 ? to_bf16(v) : to_half(v);
      r[i + k] = v - (kBf16 ? from_bf16(h[k]) : from_half(h[k]));
    }
    reinterpret_cast<uint32_t*>(out)[q] = uint32_t(h[0]) | (uint32_t(h[1]) << 16);
    if (any_bad) *bad = 1;
  });
}

template <bool kBf16>
void half_decode(cudaStream_t s, const uint16_t* in, int64_t n, float* out, bool accumulate) {
  launch_1d(s, n, [=] __device__(int64_t i) {
    const float v = kBf16 ? from_bf16(in[i]) : from_half(in[i]);
    out[i] = accumulate ? out[i] + v : v;
  });
}

constexpr int kOnebitWarps = 4;

// One warp per column. Pass 1: s = g + r into r, counting negatives. Pass 2: lanes 0-15 sum the
// negative entries and lanes 16-31 the non-negative ones of partial lane l (elements l, l+16,
// ..., in order), as the CPU's 16 accumulators per side do; combined as the CPU's combine16.
// Pass 3: sign words by ballot, residual s - level.
__global__ void onebit_encode_kernel(const float* g, float* r, int64_t n, int64_t column,
                                     OnebitLevels* levels, uint32_t* words, int* bad) {
  const int lane = threadIdx.x & 31;
  const int64_t ci = int64_t(blockIdx.x) * kOnebitWarps + (threadIdx.x >> 5);
  const int64_t c0 = ci * column;
  if (c0 >= n) return;
  const int64_t c1 = c0 + column < n ? c0 + column : n;
  int negatives = 0;
  bool any_bad = false;
  for (int64_t i = c0 + lane; i < c1; i += 32) {
    const float v = g[i] + r[i];
    any_bad |= non_finite(v);
    negatives += v < 0.0f;
    r[i] = v;
  }
  if (any_bad) *bad = 1;
  for (int o = 16; o > 0; o >>= 1) negatives += __shfl_xor_sync(0xffffffffu, negatives, o);
  __syncwarp();  // r now holds s for the whole column
  float partial = 0.0f;
  const bool want_negative = lane < 16;
  for (int64_t i = c0 + (lane & 15); i < c1; i += 16) {
    const float v = r[i];
    if ((v < 0.0f) == want_negative) partial += v;
  }
  // m[j] = l[j] + l[j + 8] of each side: lanes 0-7 the negatives', 16-23 the others'
  const float m = partial + __shfl_down_sync(0xffffffffu, partial, 8);
  float ln[8], lp[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    ln[k] = __shfl_sync(0xffffffffu, m, k);
    lp[k] = __shfl_sync(0xffffffffu, m, 16 + k);
  }
  const int64_t count_neg = negatives, count_pos = (c1 - c0) - negatives;
  OnebitLevels lv;
  lv.neg = count_neg ? (((ln[0] + ln[1]) + (ln[2] + ln[3])) + ((ln[4] + ln[5]) + (ln[6] + ln[7]))) /
                           float(count_neg)
                     : 0.0f;
  lv.pos = count_pos ? (((lp[0] + lp[1]) + (lp[2] + lp[3])) + ((lp[4] + lp[5]) + (lp[6] + lp[7]))) /
                           float(count_pos)
                     : 0.0f;
  if (lane == 0) levels[ci] = lv;
  for (int64_t base = c0; base < c1; base += 32) {  // c0 is a multiple of 32: words align
    const int64_t i = base + lane;
    const bool inside = i < c1;
    const float v = inside ? r[i] : 0.0f;
    const bool bit = inside && !(v < 0.0f);
    const uint32_t word = __ballot_sync(0xffffffffu, bit);
    if (lane == 0) words[base / 32] = word;
    if (inside) r[i] = v - (bit ? lv.pos : lv.neg);
  }
}

}  // namespace

int64_t half_encoded_bytes(int64_t n) {
  return (2 * n + 3) / 4 * 4;
}

void fp16_encode(cudaStream_t s, const float* g, float* r, int64_t n, uint16_t* out, int* bad) {
  half_encode<false>(s, g, r, n, out, bad);
}
void fp16_decode(cudaStream_t s, const uint16_t* in, int64_t n, float* out, bool accumulate) {
  half_decode<false>(s, in, n, out, accumulate);
}
void bf16_encode(cudaStream_t s, const float* g, float* r, int64_t n, uint16_t* out, int* bad) {
  half_encode<true>(s, g, r, n, out, bad);
}
void bf16_decode(cudaStream_t s, const uint16_t* in, int64_t n, float* out, bool accumulate) {
  half_decode<true>(s, in, n, out, accumulate);
}

int64_t onebit_encoded_bytes(int64_t n, int64_t column) {
  return (n + column - 1) / column * int64_t(sizeof(OnebitLevels)) + (n + 31) / 32 * 4;
}

void onebit_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t column, void* out,
                   int* bad) {
  if (n <= 0) return;
  const int64_t columns = (n + column - 1) / column;
  auto* levels = static_cast<OnebitLevels*>(out);
  auto* words = reinterpret_cast<uint32_t*>(levels + columns);
  const unsigned grid = unsigned((columns + kOnebitWarps - 1) / kOnebitWarps);
  launch_kernel(onebit_encode_kernel, s, dim3(grid), dim3(32 * kOnebitWarps), 0, g, r, n, column,
                levels, words, bad);
}

void onebit_decode(cudaStream_t s, const void* in, int64_t n, int64_t column, float* out,
                   bool accumulate) {
  const int64_t columns = (n + column - 1) / column;
  const auto* levels = static_cast<const OnebitLevels*>(in);
  const auto* words = reinterpret_cast<const uint32_t*>(levels + columns);
  launch_1d(s, n, [=] __device__(int64_t i) {
    const OnebitLevels lv = levels[i / column];
    const float v = (words[i / 32] >> (i % 32)) & 1u ? lv.pos : lv.neg;
    out[i] = accumulate ? out[i] + v : v;
  });
}

}  // namespace loom::cuda
