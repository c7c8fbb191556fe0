// Random streams. Every stream derives from (seed, rank, purpose), so runs with the same seed,
// world size and config draw the same numbers (docs/architecture.md, "Determinism").
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) is
// counter-based: element i of a stream is a pure function of (key, i), so a dropout mask can
// be generated for any slice on any device, in any order, with the same bits.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace loom {

// Named purposes keep streams apart; add new ones at the end so old streams keep their bits.
enum class RngPurpose : uint32_t {
  kInit = 1,
  kDropout = 2,
  kShuffle = 3,
  kAugment = 4,
  kCodec = 5,
  kSynthetic = 6,
  kTest = 7,
  kValidation = 8,  // which training records data.validation holds out
  kSample = 9,      // `loom sample`: the draws of generated tokens
};

// 64-bit mixing (splitmix64 finaliser, Steele et al. 2014).
uint64_t mix64(uint64_t x);
uint64_t derive_key(uint64_t seed, uint64_t rank, RngPurpose purpose, uint64_t extra = 0);

// Philox4x32's round multipliers and Weyl key increments (Salmon et al. 2011), shared by the
// scalar generator and the vectorised ones (tensor/cpu/philox_blocks.cc).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t key);

// A sequential stream over Philox blocks: uniform, normal and integer draws.
class Rng {
 public:
  explicit Rng(uint64_t key) : key_(key) {}
  Rng(uint64_t seed, uint64_t rank, RngPurpose purpose, uint64_t extra = 0)
      : key_(derive_key(seed, rank, purpose, extra)) {}

  uint32_t next_u32();
  uint64_t next_u64() { return (uint64_t(next_u32()) << 32) | next_u32(); }
  // Uniform in [0, 1) with 24 random bits.
  float uniform() { return float(next_u32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform integer in [0, n), n > 0 (Lemire's nearly-divisionless method).
  uint64_t below(uint64_t n);
  float normal();  // standard normal, Box-Muller

  uint64_t key() const { return key_; }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;
  bool has_spare_normal_ = false;
  float spare_normal_ = 0;
};

// Element i of the stream `key` as a uniform float in [0, 1): random access for masks.
inline float philox_uniform(uint64_t key, uint64_t i) {
  auto r = philox4x32({uint32_t(i >> 2), uint32_t(i >> 34), 0, 0}, key);
  return float(r[i & 3] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace loom
