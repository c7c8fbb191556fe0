// MatMul, Softmax and Scale, the pieces of an attention imported op by op: forward values
// against the definitions, gradients by finite differences, and the shapes each refuses.
#include "loom/nn/layers/attention_parts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "loom/core/error.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::expect_config_error;
using testing::make_context;
using testing::Tolerance;

TEST(MatMul, MultipliesEachMatrixOfTheBatch) {
  MatMul mm;
  // Two leading matrices per sample: [2, 2, 3] x [2, 3, 1].
  ASSERT_EQ(mm.build_inputs({{2, 2, 3}, {2, 3, 1}}), (Shape{2, 2, 1}));
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0};
  const std::vector<float> b = {1, 1, 1, 2, 3, 4};
  std::vector<float> y(4);
  mm.forward_inputs(make_context(), {a.data(), b.data()}, y.data(), 1);
  EXPECT_EQ(y, (std::vector<float>{6, 15, 2, 3}));
}

TEST(MatMul, GradientsOfBothInputs) {
  MatMul mm;
  testing::check_two_input_gradients(mm, {3, 4, 5}, {3, 5, 2}, 2, make_context(),
                                     testing::kBilinear);
}

TEST(MatMul, RefusesShapesThatDoNotMultiply) {
  expect_config_error([] { MatMul().build_inputs({{2, 3}, {2, 3}}); }, "not [..., M, K]");
  expect_config_error([] { MatMul().build_inputs({{2, 3, 4}, {3, 4, 5}}); }, "leading axes");
  expect_config_error([] { MatMul().build_inputs({{3}, {3}}); }, "not [..., M, K]");
}

TEST(Softmax, RowsSumToOneAndFollowTheDefinition) {
  Softmax s;
  ASSERT_EQ(s.build({2, 3}), (Shape{2, 3}));
  const std::vector<float> x = {0, 1, 2, -1, -1, 5};
  std::vector<float> y(6);
  s.forward(make_context(), x.data(), y.data(), 1);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(double(x[size_t(r * 3 + c)]));
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(y[size_t(r * 3 + c)], std::exp(double(x[size_t(r * 3 + c)])) / sum, 1e-6);
  }
  check_layer_gradients(s, {4, 7}, 2, testing::random_vector(56, 4), make_context(), Tolerance{});
}

TEST(Softmax, CausalRowsSeeTheirPast) {
  Softmax s(true);
  ASSERT_EQ(s.build({2, 3, 3}), (Shape{2, 3, 3}));
  const auto x = testing::random_vector(18, 5);
  std::vector<float> y(18);
  s.forward(make_context(), x.data(), y.data(), 1);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i) {
      double sum = 0;
      for (int j = 0; j < 3; ++j) {
        const float v = y[size_t(b * 9 + i * 3 + j)];
        if (j > i) {
          EXPECT_EQ(v, 0.0f);
        }
        sum += v;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  check_layer_gradients(s, {2, 5, 5}, 2, testing::random_vector(100, 6), make_context(),
                        Tolerance{});
  expect_config_error([] { Softmax(true).build({2, 3}); }, "square");
}

TEST(Scale, MultipliesByItsFactor) {
  Scale s(-0.25f);
  ASSERT_EQ(s.build({3}), (Shape{3}));
  const std::vector<float> x = {4, -8, 1};
  std::vector<float> y(3);
  s.forward(make_context(), x.data(), y.data(), 1);
  EXPECT_EQ(y, (std::vector<float>{-1, 2, -0.25f}));
  check_layer_gradients(s, {2, 3}, 2, testing::random_vector(12, 7), make_context(), Tolerance{});
}

}  // namespace
}  // namespace loom::nn
