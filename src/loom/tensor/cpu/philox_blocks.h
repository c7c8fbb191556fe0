// Philox4x32-10 (Salmon et al., SC 2011) over many consecutive counter blocks at once, for
// dropout's masks: block b is philox4x32({lo32(b), hi32(b), 0, 0}, key), and out[4 * l + w] is
// word w of block first_block + l, so the words come in element order. The same bits as the
// scalar loom::philox4x32 (tests/tensor/cpu/philox_blocks_test.cc compares every path).
#pragma once

#include <cstdint>

namespace loom::cpu {

inline constexpr int kPhiloxBlocks = 16;      // per philox_blocks call (AVX2: 2 x 8 lanes)
inline constexpr int kPhiloxWideBlocks = 32;  // per philox_blocks_wide call (AVX-512: 2 x 16)

// out: 4 * kPhiloxBlocks words. AVX2 when built for it, else scalar.
void philox_blocks(uint64_t first_block, uint64_t key, uint32_t* out);
// out: 4 * kPhiloxWideBlocks words. Only when cpu_has_avx512() (core/cpu_features.h).
void philox_blocks_wide(uint64_t first_block, uint64_t key, uint32_t* out);

}  // namespace loom::cpu
