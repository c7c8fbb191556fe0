#include "loom/tensor/cpu/philox_blocks.h"

#include <immintrin.h>

#include "loom/core/rng.h"

namespace loom::cpu {

#ifdef __AVX2__
namespace {
// AVX2 has only a 32x32->64 multiply of the even 32-bit lanes, so odd lanes are shifted down,
// multiplied separately, and the high and low halves blended back into place.
inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}
// Four vectors of word w (lanes = blocks) -> four vectors of whole blocks, two per vector.
inline void store_blocks8(__m256i w0, __m256i w1, __m256i w2, __m256i w3, uint32_t* out) {
  const __m256i t0 = _mm256_unpacklo_epi32(w0, w1), t1 = _mm256_unpackhi_epi32(w0, w1);
  const __m256i t2 = _mm256_unpacklo_epi32(w2, w3), t3 = _mm256_unpackhi_epi32(w2, w3);
  const __m256i b04 = _mm256_unpacklo_epi64(t0, t2), b15 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i b26 = _mm256_unpacklo_epi64(t1, t3), b37 = _mm256_unpackhi_epi64(t1, t3);
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(b04, b15, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(b26, b37, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(b04, b15, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(b26, b37, 0x31));
}
}  // namespace

// Eight blocks per vector, two vectors in flight to hide the multiply latency.
void philox_blocks(uint64_t first_block, uint64_t key, uint32_t* out) {
  alignas(32) uint32_t lo32[kPhiloxBlocks], hi32[kPhiloxBlocks];
  for (int l = 0; l < kPhiloxBlocks; ++l) {
    const uint64_t b = first_block + uint64_t(l);
    lo32[l] = uint32_t(b);
    hi32[l] = uint32_t(b >> 32);
  }
  __m256i c0[2], c1[2], c2[2], c3[2];
  for (int v = 0; v < 2; ++v) {
    c0[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo32 + 8 * v));
    c1[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi32 + 8 * v));
    c2[v] = _mm256_setzero_si256();
    c3[v] = _mm256_setzero_si256();
  }
  const __m256i m0 = _mm256_set1_epi32(int(kPhiloxM0)), m1 = _mm256_set1_epi32(int(kPhiloxM1));
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i vk0 = _mm256_set1_epi32(int(k0)), vk1 = _mm256_set1_epi32(int(k1));
    for (int v = 0; v < 2; ++v) {
      __m256i hi0, lo0, hi1, lo1;
      mulhilo8(c0[v], m0, hi0, lo0);
      mulhilo8(c2[v], m1, hi1, lo1);
      c0[v] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[v]), vk0);
      c2[v] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[v]), vk1);
      c1[v] = lo1;
      c3[v] = lo0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  for (int v = 0; v < 2; ++v) store_blocks8(c0[v], c1[v], c2[v], c3[v], out + 32 * v);
}
#else
void philox_blocks(uint64_t first_block, uint64_t key, uint32_t* out) {
  for (int l = 0; l < kPhiloxBlocks; ++l) {
    const uint64_t b = first_block + uint64_t(l);
    const auto block = philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key);
    for (int w = 0; w < 4; ++w) out[4 * l + w] = block[w];
  }
}
#endif

#define LOOM_PHILOX_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
// GCC 12's AVX-512 shift intrinsics pass _mm512_undefined_epi32() as the unused merge source,
// which -Wuninitialized reports; nothing uninitialised is read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {
// The AVX2 scheme on 16 lanes: even and odd products, blended by a lane mask.
LOOM_PHILOX_AVX512 inline void mulhilo16(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}
// Four vectors of word w (lanes = blocks) -> four vectors of whole blocks, four per vector:
// within each 128-bit lane a 4x4 transpose of words gives one block per lane (vector b04 holds
// blocks 0, 4, 8, 12, b15 blocks 1, 5, 9, 13, ...), then a 4x4 transpose of the 128-bit lanes
// puts blocks 0-3 in the first output vector, 4-7 in the second, and so on.
LOOM_PHILOX_AVX512 inline void store_blocks16(__m512i w0, __m512i w1, __m512i w2, __m512i w3,
                                              uint32_t* out) {
  const __m512i t0 = _mm512_unpacklo_epi32(w0, w1), t1 = _mm512_unpackhi_epi32(w0, w1);
  const __m512i t2 = _mm512_unpacklo_epi32(w2, w3), t3 = _mm512_unpackhi_epi32(w2, w3);
  const __m512i b04 = _mm512_unpacklo_epi64(t0, t2), b15 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i b26 = _mm512_unpacklo_epi64(t1, t3), b37 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i x0 = _mm512_shuffle_i32x4(b04, b15, 0x44);  // b04.l0 b04.l1 b15.l0 b15.l1
  const __m512i x1 = _mm512_shuffle_i32x4(b26, b37, 0x44);
  const __m512i x2 = _mm512_shuffle_i32x4(b04, b15, 0xEE);  // b04.l2 b04.l3 b15.l2 b15.l3
  const __m512i x3 = _mm512_shuffle_i32x4(b26, b37, 0xEE);
  _mm512_storeu_si512(out + 0, _mm512_shuffle_i32x4(x0, x1, 0x88));   // lanes 0 of b04..b37
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(x0, x1, 0xDD));  // lanes 1
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(x2, x3, 0x88));  // lanes 2
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(x2, x3, 0xDD));  // lanes 3
}
}  // namespace

// Sixteen blocks per vector, two vectors in flight: twice the AVX2 path's draws per second on
// Zen 5 (dropout's forward in the default MLP's step: 0.26 -> 0.13 ms, docs/gemm.md).
LOOM_PHILOX_AVX512 void philox_blocks_wide(uint64_t first_block, uint64_t key, uint32_t* out) {
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __m512i c0[2], c1[2], c2[2], c3[2];
  for (int v = 0; v < 2; ++v) {
    // Block numbers first_block + 16 v + lane, as 64-bit sums split into low and high words.
    const uint64_t base = first_block + uint64_t(16 * v);
    const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32(int(uint32_t(base))), lanes);
    // The low word wrapped where it came out below the base's low word: carry one.
    const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, _mm512_set1_epi32(int(uint32_t(base))));
    const __m512i hi =
        _mm512_mask_add_epi32(_mm512_set1_epi32(int(uint32_t(base >> 32))), carry,
                              _mm512_set1_epi32(int(uint32_t(base >> 32))), _mm512_set1_epi32(1));
    c0[v] = lo;
    c1[v] = hi;
    c2[v] = _mm512_setzero_si512();
    c3[v] = _mm512_setzero_si512();
  }
  const __m512i m0 = _mm512_set1_epi32(int(kPhiloxM0)), m1 = _mm512_set1_epi32(int(kPhiloxM1));
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m512i vk0 = _mm512_set1_epi32(int(k0)), vk1 = _mm512_set1_epi32(int(k1));
    for (int v = 0; v < 2; ++v) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo16(c0[v], m0, hi0, lo0);
      mulhilo16(c2[v], m1, hi1, lo1);
      c0[v] = _mm512_xor_si512(_mm512_xor_si512(hi1, c1[v]), vk0);
      c2[v] = _mm512_xor_si512(_mm512_xor_si512(hi0, c3[v]), vk1);
      c1[v] = lo1;
      c3[v] = lo0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  for (int v = 0; v < 2; ++v) store_blocks16(c0[v], c1[v], c2[v], c3[v], out + 64 * v);
}

#pragma GCC diagnostic pop

}  // namespace loom::cpu
