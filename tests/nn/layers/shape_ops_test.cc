// Reshape, Transpose, Slice and Mul: forward values against the definitions (index arithmetic
// written out here), gradients by finite differences, and the shapes each refuses.
#include "loom/nn/layers/shape_ops.h"

#include <gtest/gtest.h>

#include <vector>

#include "loom/core/error.h"
#include "loom/nn/layers/merge.h"
#include "loom/nn/layers/pad.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::expect_config_error;
using testing::make_context;
using testing::Tolerance;

std::vector<float> iota_floats(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return v;
}

TEST(Transpose, MovesEachSamplesAxes) {
  // [2, 3, 4] -> perm [2, 0, 1] -> [4, 2, 3]: y[k, i, j] = x[i, j, k].
  Transpose t({2, 0, 1});
  ASSERT_EQ(t.build({2, 3, 4}), (Shape{4, 2, 3}));
  const int64_t batch = 2;
  const auto x = iota_floats(batch * 24);
  std::vector<float> y(x.size(), -1.0f);
  t.forward(make_context(), x.data(), y.data(), batch);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k)
          ASSERT_EQ(y[size_t(b * 24 + k * 6 + i * 3 + j)], x[size_t(b * 24 + i * 12 + j * 4 + k)]);
}

TEST(Transpose, ChannelShuffleKeepsThePlaneWhole) {
  // ShuffleNet's shuffle: [groups, C / groups, H, W] with perm [1, 0, 2, 3].
  Transpose t({1, 0, 2, 3});
  ASSERT_EQ(t.build({2, 3, 2, 2}), (Shape{3, 2, 2, 2}));
  const auto x = iota_floats(24);
  std::vector<float> y(24);
  t.forward(make_context(), x.data(), y.data(), 1);
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 4; ++p)
        EXPECT_EQ(y[size_t((c * 2 + g) * 4 + p)], x[size_t((g * 3 + c) * 4 + p)]);
}

TEST(Transpose, Gradients) {
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{1, 0}, {2, 1, 0}, {0, 2, 1}, {1, 0, 2, 3}, {3, 1, 2, 0}}) {
    Shape in = {2, 3, 4, 5};
    in.resize(perm.size());
    Transpose t(perm);
    const int64_t n = numel(in) * 2;
    check_layer_gradients(t, in, 2, testing::random_vector(n, 7), make_context(), Tolerance{});
  }
}

TEST(Transpose, RefusesWhatIsNotAPermutation) {
  expect_config_error([] { Transpose({0, 0}).build({2, 3}); }, "not an order");
  expect_config_error([] { Transpose({0, 1, 2}).build({2, 3}); }, "does not fit");
  expect_config_error([] { Transpose({0, 2}).build({2, 3}); }, "not an order");
}

TEST(Slice, TakesARangeOfOneAxis) {
  // [4, 3] rows 1..3 (axis 0), then [4, 3] columns 1..2 (axis 1).
  const auto x = iota_floats(2 * 12);
  Slice rows(0, 1, 3);
  ASSERT_EQ(rows.build({4, 3}), (Shape{2, 3}));
  std::vector<float> y(2 * 6);
  rows.forward(make_context(), x.data(), y.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20}));
  Slice cols(1, 1, 2);
  ASSERT_EQ(cols.build({4, 3}), (Shape{4, 1}));
  std::vector<float> z(2 * 4);
  cols.forward(make_context(), x.data(), z.data(), 2);
  EXPECT_EQ(z, (std::vector<float>{1, 4, 7, 10, 13, 16, 19, 22}));
}

TEST(Slice, Gradients) {
  for (int64_t axis : {0, 1, 2}) {
    Slice s(axis, 1, 3);
    check_layer_gradients(s, {4, 3, 5}, 2, testing::random_vector(2 * 60, 9), make_context(),
                          Tolerance{});
  }
}

TEST(Slice, RefusesAnEmptyOrOutsideRange) {
  expect_config_error([] { Slice(0, 2, 2).build({4}); }, "not a non-empty range");
  expect_config_error([] { Slice(0, 1, 5).build({4}); }, "not a non-empty range");
  expect_config_error([] { Slice(2, 0, 1).build({4, 4}); }, "not an axis");
}

// Each output element is the input's at its index less `before`, or 0 outside: written out for
// every padded axis and combination (the innermost padded axis first, last, or a middle one).
TEST(Pad, PutsZerosBeforeAndAfterEachAxis) {
  const Shape in = {2, 3, 4};
  for (const auto& [before, after] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{{{1, 0, 0}, {2, 0, 0}},
                                                                          {{0, 2, 0}, {0, 1, 0}},
                                                                          {{0, 0, 1}, {0, 0, 3}},
                                                                          {{0, 1, 2}, {0, 3, 0}},
                                                                          {{1, 0, 1}, {0, 2, 0}},
                                                                          {{0, 0, 0}, {0, 0, 0}}}) {
    Pad p(before, after);
    const Shape out = p.build(in);
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], in[i] + before[i] + after[i]);
    const int64_t batch = 2;
    const auto x = iota_floats(batch * numel(in));
    std::vector<float> y(size_t(batch * numel(out)), -1.0f);
    p.forward(make_context(), x.data(), y.data(), batch);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t a = 0; a < out[0]; ++a)
        for (int64_t b = 0; b < out[1]; ++b)
          for (int64_t c = 0; c < out[2]; ++c) {
            const int64_t i = a - before[0], j = b - before[1], k = c - before[2];
            const bool inside = i >= 0 && i < in[0] && j >= 0 && j < in[1] && k >= 0 && k < in[2];
            const float want = inside ? x[size_t(((n * in[0] + i) * in[1] + j) * in[2] + k)] : 0;
            ASSERT_EQ(y[size_t(((n * out[0] + a) * out[1] + b) * out[2] + c)], want)
                << n << " " << a << " " << b << " " << c;
          }
  }
}

TEST(Pad, Gradients) {
  Pad p({0, 1, 2}, {1, 0, 3});
  check_layer_gradients(p, {2, 3, 4}, 2, testing::random_vector(2 * 24, 10), make_context(),
                        Tolerance{});
}

TEST(Pad, RefusesCountsThatDoNotFitTheAxes) {
  expect_config_error([] { Pad({0, 1}, {0, 1}).build({2, 3, 4}); }, "one entry per axis");
  expect_config_error([] { Pad({0, -1}, {0, 1}).build({2, 3}); }, "from 0 to 2^20");
}

TEST(Reshape, KeepsTheValuesInOrder) {
  Reshape r({2, 6});
  ASSERT_EQ(r.build({3, 4}), (Shape{2, 6}));
  const auto x = iota_floats(24);
  std::vector<float> y(24);
  r.forward(make_context(), x.data(), y.data(), 2);
  EXPECT_EQ(y, x);
  check_layer_gradients(r, {3, 4}, 2, testing::random_vector(24, 3), make_context(), Tolerance{});
  expect_config_error([] { Reshape({5}).build({2, 3}); }, "cannot become");
}

void check_mul(const Shape& a_shape, const Shape& b_shape, int64_t batch) {
  Mul mul;
  testing::check_two_input_gradients(mul, a_shape, b_shape, batch, make_context(), Tolerance{});
}

TEST(Mul, SameShapeIsElementwise) {
  Mul mul;
  ASSERT_EQ(mul.build_inputs({{2, 3}, {2, 3}}), (Shape{2, 3}));
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {2, 2, 0.5f, -1, 0, 3};
  std::vector<float> y(6);
  mul.forward_inputs(make_context(), {a.data(), b.data()}, y.data(), 1);
  EXPECT_EQ(y, (std::vector<float>{2, 4, 1.5f, -4, 0, 18}));
  check_mul({2, 3}, {2, 3}, 3);
}

TEST(Mul, AChannelGateScalesItsPlane) {
  Mul mul;
  // The gate first or second: the output has the larger input's shape either way.
  ASSERT_EQ(mul.build_inputs({{2, 1, 1}, {2, 2, 2}}), (Shape{2, 2, 2}));
  const std::vector<float> gate = {10, -1}, x = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> y(8);
  mul.forward_inputs(make_context(), {gate.data(), x.data()}, y.data(), 1);
  EXPECT_EQ(y, (std::vector<float>{10, 20, 30, 40, -5, -6, -7, -8}));
  check_mul({3, 4, 5}, {3, 1, 1}, 2);
  check_mul({3, 1, 1}, {3, 4, 5}, 2);
  check_mul({4, 6}, {4, 1}, 2);
}

TEST(Mul, RefusesShapesThatDoNotBroadcast) {
  expect_config_error([] { Mul().build_inputs({{2, 3}, {3, 2}}); }, "neither have one shape");
  // A gate over the leading axes ([1, H, W]) is not the trailing broadcast loom computes.
  expect_config_error([] { Mul().build_inputs({{4, 2, 2}, {1, 2, 2}}); }, "trailing");
}

}  // namespace
}  // namespace loom::nn
