#include "loom/core/rng.h"

#include <cmath>

namespace loom {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t derive_key(uint64_t seed, uint64_t rank, RngPurpose purpose, uint64_t extra) {
  uint64_t h = mix64(seed);
  h = mix64(h ^ rank);
  h = mix64(h ^ static_cast<uint64_t>(purpose));
  return mix64(h ^ extra);
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint64_t key) {
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kPhiloxM0) * c[0];
    uint64_t p1 = uint64_t(kPhiloxM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
         uint32_t(p0)};
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return c;
}

uint32_t Rng::next_u32() {
  if (used_ == 4) {
    block_ = philox4x32({uint32_t(counter_), uint32_t(counter_ >> 32), 0, 0}, key_);
    ++counter_;
    used_ = 0;
  }
  return block_[used_++];
}

uint64_t Rng::below(uint64_t n) {
  uint64_t x = next_u64();
  __uint128_t m = __uint128_t(x) * n;
  uint64_t low = uint64_t(m);
  if (low < n) {
    uint64_t threshold = -n % n;
    while (low < threshold) {
      x = next_u64();
      m = __uint128_t(x) * n;
      low = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

float Rng::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  float u1 = uniform(), u2 = uniform();
  if (u1 < 1e-12f) u1 = 1e-12f;
  float r = std::sqrt(-2.0f * std::log(u1));
  float t = 6.283185307179586f * u2;
  spare_normal_ = r * std::sin(t);
  has_spare_normal_ = true;
  return r * std::cos(t);
}

}  // namespace loom
