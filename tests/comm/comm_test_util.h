// Helpers for the comm tests (gloo style): every rank's input is seeded so every value on
// every rank differs, and results are checked against closed forms.
#pragma once

#include <cstddef>
#include <vector>

namespace loom::comm::testing {

// Input element i of rank r: exact in float (small integers), distinct over (r, i) as long as
// i < 4096 (larger buffers repeat the pattern with period 4096 but stay distinct per rank).
inline float input_value(int r, size_t i) {
  return float(r * 4096 + int(i % 4096) + 1);
}

// Sum over ranks 0..n-1 of input_value(r, i) = 4096 * n(n-1)/2 + n * (i % 4096 + 1).
inline float expected_sum(int n, size_t i) {
  return float(4096.0 * n * (n - 1) / 2 + double(n) * double(i % 4096 + 1));
}

inline std::vector<float> make_input(int r, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input_value(r, i);
  return v;
}

}  // namespace loom::comm::testing
