// Philox4x32-10 on the device: the same function as loom::philox4x32 in core/rng.cc
// (Salmon et al., SC 2011), so a dropout mask drawn on the GPU has the CPU's bits.
#pragma once

#include <cstdint>

namespace loom::cuda {

struct Philox4 {
  uint32_t w[4];
};

__device__ __forceinline__ Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                              uint64_t key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) from the top 24 bits, exactly as philox_uniform in core/rng.h.
__device__ __forceinline__ float philox_to_uniform(uint32_t r) {
  return float(r >> 8) * (1.0f / 16777216.0f);
}

}  // namespace loom::cuda
