// Top-k on the device (compress/topk_codec.h has the format and the reference): the same
// entries as the CPU codec, bit for bit. The k-th largest magnitude is found by radix select
// on the magnitude's bits (a non-negative float orders as its bit pattern): three histogram
// passes over 11 + 10 + 10 bits, each followed by a one-thread pick of the bucket that holds
// the k-th entry, all on the device. Then entries above the threshold are sent, and of those
// equal to it the lowest indices first; their output slots come from an exclusive scan of the
// (above, tie) counts in index order (tiles of kTile elements), so the output is sorted by
// index as the reference's is.
#include "loom/compress/cuda/codec_kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {
namespace {

struct Entry {
  uint32_t index;
  float value;
};
static_assert(sizeof(Entry) == 8, "layout of compress::TopkEntry");

struct SelectState {
  uint32_t prefix, mask;  // bits of the threshold found so far
  uint64_t remaining;     // entries still to pick at or below the current prefix
  uint64_t above;         // entries known to be above the threshold
};

constexpr int kPasses = 3;
// Digits of the magnitude's bits 30..0 (bit 31, the sign, is 0): 11, 10 and 10 bits.
__host__ __device__ constexpr int digit_shift(int pass) {
  return pass == 0 ? 20 : pass == 1 ? 10 : 0;
}
__host__ __device__ constexpr int digit_bits(int pass) {
  return pass == 0 ? 11 : 10;
}
constexpr int kMaxBins = 1 << 11;
constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int64_t kTile = kThreads * kPerThread;

struct Workspace {
  SelectState* state;
  uint32_t* hist;      // kPasses x kMaxBins
  uint64_t* tile_sum;  // per tile: above count << 32 | tie count, then their exclusive scan
};

Workspace carve(void* ws) {
  auto* base = static_cast<char*>(ws);
  Workspace w;
  w.state = reinterpret_cast<SelectState*>(base);
  w.hist = reinterpret_cast<uint32_t*>(base + 64);
  w.tile_sum = reinterpret_cast<uint64_t*>(base + 64 + kPasses * kMaxBins * 4);
  return w;
}

__device__ __forceinline__ uint32_t key_of(float s) {
  return __float_as_uint(s) & 0x7fffffffu;
}

__device__ __forceinline__ bool non_finite(float f) {
  return (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u;
}

__global__ void init_kernel(SelectState* st, uint64_t k) {
  st->prefix = 0;
  st->mask = 0;
  st->remaining = k;
  st->above = 0;
}

// Histogram of pass `pass`'s digit over the entries whose higher bits match the prefix. Pass 0
// also forms s = g + r (into r) and flags NaN/Inf.
template <bool kFirst>
__global__ void histogram_kernel(const float* g, float* r, int64_t n, const SelectState* st,
                                 int pass, uint32_t* hist, int* bad) {
  __shared__ uint32_t local[kMaxBins];
  const int bins = 1 << digit_bits(pass);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const uint32_t prefix = kFirst ? 0 : st->prefix, mask = kFirst ? 0 : st->mask;
  const int shift = digit_shift(pass);
  bool any_bad = false;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float s;
    if (kFirst) {
      s = __fadd_rn(g[i], r[i]);
      any_bad |= non_finite(s);
      r[i] = s;
    } else {
      s = r[i];
    }
    const uint32_t key = key_of(s);
    if ((key & mask) == prefix) atomicAdd(&local[(key >> shift) & uint32_t(bins - 1)], 1u);
  }
  if (kFirst && any_bad) *bad = 1;
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

// The bucket of the pass's digit that holds the k-th largest: walk from the top.
__global__ void pick_kernel(SelectState* st, const uint32_t* hist, int pass) {
  const int bins = 1 << digit_bits(pass);
  uint64_t cum = 0;
  for (int b = bins - 1; b >= 0; --b) {
    const uint64_t c = hist[b];
    if (cum + c >= st->remaining || b == 0) {
      st->prefix |= uint32_t(b) << digit_shift(pass);
      st->mask |= uint32_t(bins - 1) << digit_shift(pass);
      st->remaining -= cum;
      st->above += cum;
      return;
    }
    cum += c;
  }
}

__device__ __forceinline__ uint64_t flags_of(float s, uint32_t thr) {
  const uint32_t key = key_of(s);
  return (uint64_t(key > thr) << 32) | uint64_t(key == thr);
}

// Inclusive block scan of one uint64 per thread; returns the thread's exclusive prefix and
// the block total in *total.
__device__ uint64_t block_exclusive_scan(uint64_t v, uint64_t* total) {
  __shared__ uint64_t warp_sums[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  uint64_t before = 0, all = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += warp_sums[w];
    all += warp_sums[w];
  }
  __syncthreads();  // warp_sums may be reused by the caller's next scan
  *total = all;
  return before + x - v;
}

// Per tile of kTile elements: the (above, tie) counts.
__global__ void tile_count_kernel(const float* r, int64_t n, const SelectState* st,
                                  uint64_t* tile_sum) {
  const uint32_t thr = st->prefix;
  const int64_t t0 = int64_t(blockIdx.x) * kTile + int64_t(threadIdx.x) * kPerThread;
  uint64_t mine = 0;
  for (int j = 0; j < kPerThread; ++j)
    if (t0 + j < n) mine += flags_of(r[t0 + j], thr);
  uint64_t total;
  block_exclusive_scan(mine, &total);
  if (threadIdx.x == 0) tile_sum[blockIdx.x] = total;
}

// Exclusive scan of the tile counts, in one block (tiles = n / 2048: 32 K for 64 M elements).
__global__ void tile_scan_kernel(uint64_t* tile_sum, int64_t tiles) {
  uint64_t carry = 0;
  for (int64_t base = 0; base < tiles; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const uint64_t v = i < tiles ? tile_sum[i] : 0;
    uint64_t total;
    const uint64_t ex = block_exclusive_scan(v, &total);
    if (i < tiles) tile_sum[i] = carry + ex;
    carry += total;
  }
}

// Writes the chosen entries at their slots and clears their residuals.
__global__ void emit_kernel(float* r, int64_t n, const SelectState* st, const uint64_t* tile_sum,
                            Entry* out) {
  const uint32_t thr = st->prefix;
  const uint64_t ties = st->remaining;  // entries equal to thr that are sent
  const int64_t t0 = int64_t(blockIdx.x) * kTile + int64_t(threadIdx.x) * kPerThread;
  uint64_t mine = 0;
  for (int j = 0; j < kPerThread; ++j)
    if (t0 + j < n) mine += flags_of(r[t0 + j], thr);
  uint64_t total;
  uint64_t before = tile_sum[blockIdx.x] + block_exclusive_scan(mine, &total);
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = t0 + j;
    if (i >= n) break;
    const float s = r[i];
    const uint64_t f = flags_of(s, thr);
    const uint64_t above_before = before >> 32, ties_before = before & 0xffffffffu;
    const bool take = (f >> 32) != 0 || ((f & 1u) != 0 && ties_before < ties);
    if (take) {
      const uint64_t slot = above_before + (ties_before < ties ? ties_before : ties);
      out[slot] = Entry{uint32_t(i), s};
      r[i] = 0.0f;
    }
    before += f;
  }
}

}  // namespace

int64_t topk_workspace_bytes(int64_t n) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  return 64 + kPasses * kMaxBins * 4 + 8 * (tiles > 0 ? tiles : 1);
}

void topk_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t k, void* out,
                 void* workspace, int* bad) {
  if (n <= 0 || k <= 0) return;
  const Workspace w = carve(workspace);
  LOOM_CUDA_CHECK(cudaMemsetAsync(w.hist, 0, kPasses * kMaxBins * 4, s));
  launch_kernel(init_kernel, s, dim3(1), dim3(1), 0, w.state, uint64_t(k));
  const unsigned grid = blocks_for(n, kThreads);
  for (int pass = 0; pass < kPasses; ++pass) {
    uint32_t* hist = w.hist + pass * kMaxBins;
    if (pass == 0) {
      launch_kernel(histogram_kernel<true>, s, dim3(grid), dim3(kThreads), 0, g, r, n,
                    static_cast<const SelectState*>(w.state), pass, hist, bad);
    } else {
      launch_kernel(histogram_kernel<false>, s, dim3(grid), dim3(kThreads), 0, g, r, n,
                    static_cast<const SelectState*>(w.state), pass, hist, bad);
    }
    launch_kernel(pick_kernel, s, dim3(1), dim3(1), 0, w.state, static_cast<const uint32_t*>(hist),
                  pass);
  }
  const int64_t tiles = (n + kTile - 1) / kTile;
  launch_kernel(tile_count_kernel, s, dim3(unsigned(tiles)), dim3(kThreads), 0,
                static_cast<const float*>(r), n, static_cast<const SelectState*>(w.state),
                w.tile_sum);
  launch_kernel(tile_scan_kernel, s, dim3(1), dim3(kThreads), 0, w.tile_sum, tiles);
  launch_kernel(emit_kernel, s, dim3(unsigned(tiles)), dim3(kThreads), 0, r, n,
                static_cast<const SelectState*>(w.state), static_cast<const uint64_t*>(w.tile_sum),
                static_cast<Entry*>(out));
}

void topk_decode(cudaStream_t s, const void* in, int64_t k, int64_t n, float* out,
                 bool accumulate) {
  if (!accumulate && n > 0) LOOM_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(n) * 4, s));
  const auto* e = static_cast<const Entry*>(in);
  // Indices within one encoding are distinct: no two threads touch one element.
  launch_1d(s, k, [=] __device__(int64_t j) {
    const Entry x = e[j];
    if (int64_t(x.index) < n) out[x.index] = __fadd_rn(out[x.index], x.value);
  });
}

}  // namespace loom::cuda
