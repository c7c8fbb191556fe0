// exp and the normal CDF in float without a library call, so that the elementwise loops that use
// them vectorise. glibc's expf and erff are scalar calls: GELU's forward and backward through
// them were about a quarter of gpt-char's training step on an AVX2 CPU (perf, 1 thread). The
// file that uses these is compiled with -fno-trapping-math (tensor/CMakeLists.txt), without
// which GCC keeps the selects below as branches and does not vectorise the loop; the option
// changes no value.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace loom::cpu {

// e^x within 8e-8 relative for x in [-87, 88] (clamped there: e^-87 is near the smallest normal
// float). Cody and Waite's reduction x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that
// n ln2 is exact for the n that occur), e^r by its Taylor polynomial to r^7 / 7! (the next term
// is below 1e-8 relative on that range), and 2^n written into the exponent bits.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((int32_t(n) + 127) << 23);
}

// Phi(x), the standard normal CDF, as erfc(|x| / sqrt 2) / 2 for the lower tail and 1 minus that
// for the upper: the tail keeps its relative accuracy where 1 + erf(x / sqrt 2) in float would
// cancel (GELU of a very negative input). erfc by Numerical Recipes' Chebyshev fit (Press et al.,
// 2nd ed., section 6.2, erfcc: fractional error below 1.2e-7 everywhere). Evaluated in float
// with exp_approx, Phi is within 2.1e-7 absolute for x >= 0 and within 1.8e-6 relative where it
// is above 1e-5 (measured against double erfc on a 1e-5 grid over [-15, 15];
// tests/tensor/cpu/vector_math_test.cc): libm's erff in 0.5 (1 + erf) loses 1e-3 relative there.
inline float normal_cdf(float x) {
  const float z = std::fabs(x) * 0.70710678118654752440f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float poly =
      -1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f +
                               t * (-1.13520398f +
                                    t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  const float tail = 0.5f * t * exp_approx(poly - z * z);
  const float upper = 1.0f - tail;
  return x >= 0.0f ? upper : tail;
}

// Sums over a row in double as kSumLanes interleaved partial sums (element c goes to lane
// c mod kSumLanes), the lanes added in one fixed order at the end, then the elements past the
// last whole group. A single running double sum is a chain of dependent adds (4 cycles each on
// current x86) that the compiler may not reorder, so LayerNorm's and the softmax's row sums ran
// at a quarter of an element per cycle; the lanes are what two AVX2 registers of doubles hold.
// The order is fixed, so the result is still one function of the inputs on every machine.
constexpr int64_t kSumLanes = 8;

struct LaneSums {
  double lane[kSumLanes] = {};
  double tail = 0;
  double total() const {
    return (((lane[0] + lane[4]) + (lane[1] + lane[5])) +
            ((lane[2] + lane[6]) + (lane[3] + lane[7]))) +
           tail;
  }
};

// sum over c in [0, n) of term(c), where term returns a double.
template <typename Term>
inline double lane_sum(int64_t n, Term term) {
  LaneSums s;
  int64_t c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes)
    for (int64_t j = 0; j < kSumLanes; ++j) s.lane[j] += term(c + j);
  for (; c < n; ++c) s.tail += term(c);
  return s.total();
}

}  // namespace loom::cpu
