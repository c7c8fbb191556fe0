// MaxPool2d, AvgPool2d (padding, ceil mode, count_include_pad) and GlobalAvgPool2d against
// PyTorch's values (tests/data/nn), by finite differences, and their configuration errors.
#include "loom/nn/layers/pool2d.h"

#include <gtest/gtest.h>

#include <numeric>

#include "loom/core/error.h"
#include "nn/grad_check.h"
#include "nn/reference_data.h"

namespace loom::nn {
namespace {

using testing::distinct_values;
using testing::expect_config_error;
using testing::expect_matches;
using testing::load_reference;
using testing::Reference;

Pool2dOptions pool_options_of(const Reference& ref) {
  return Pool2dOptions{.kernel_h = ref.iattr("kernel_h"),
                       .kernel_w = ref.iattr("kernel_w"),
                       .stride_h = ref.iattr("stride_h"),
                       .stride_w = ref.iattr("stride_w"),
                       .pad_h = ref.iattr("pad_h"),
                       .pad_w = ref.iattr("pad_w"),
                       .ceil_mode = ref.iattr("ceil_mode") != 0,
                       .count_include_pad = ref.iattr("count_include_pad") != 0};
}

void expect_layer_matches(Layer& layer, const Reference& ref) {
  const auto run = testing::run_layer(layer, ref, {}, {});
  const auto& y = ref.tensor("y");
  EXPECT_EQ(run.out_shape, Shape(y.shape.begin() + 1, y.shape.end()));
  expect_matches("y", run.y, y);
  expect_matches("dx", run.dx, ref.tensor("dx"));
}

class MaxPoolReference : public ::testing::TestWithParam<const char*> {};
TEST_P(MaxPoolReference, MatchesPyTorch) {
  const Reference ref = load_reference(GetParam());
  MaxPool2d layer(pool_options_of(ref));
  expect_layer_matches(layer, ref);
}
INSTANTIATE_TEST_SUITE_P(PyTorch, MaxPoolReference,
                         ::testing::Values("maxpool_pad", "maxpool_ceil"));

class AvgPoolReference : public ::testing::TestWithParam<const char*> {};
TEST_P(AvgPoolReference, MatchesPyTorch) {
  const Reference ref = load_reference(GetParam());
  AvgPool2d layer(pool_options_of(ref));
  expect_layer_matches(layer, ref);
}
INSTANTIATE_TEST_SUITE_P(PyTorch, AvgPoolReference,
                         ::testing::Values("avgpool_pad", "avgpool_ceil_exclude_pad",
                                           "avgpool_ceil_include_pad"));

TEST(GlobalAvgPool2d, MatchesPyTorch) {
  GlobalAvgPool2d layer;
  expect_layer_matches(layer, load_reference("global_avgpool"));
}

// Average pooling is linear, so the default step has no truncation error.
TEST(AvgPool2d, Gradients) {
  AvgPool2d include(Pool2dOptions{.kernel_h = 3,
                                  .kernel_w = 2,
                                  .stride_h = 2,
                                  .stride_w = 1,
                                  .pad_h = 1,
                                  .pad_w = 1,
                                  .ceil_mode = true,
                                  .count_include_pad = true});
  testing::check_layer_gradients(include, {2, 6, 5}, 2, testing::random_vector(120, 41),
                                 testing::make_context(), testing::Tolerance{});
  AvgPool2d exclude(Pool2dOptions{.kernel_h = 3,
                                  .kernel_w = 3,
                                  .stride_h = 2,
                                  .stride_w = 2,
                                  .pad_h = 1,
                                  .pad_w = 1,
                                  .ceil_mode = true,
                                  .count_include_pad = false});
  testing::check_layer_gradients(exclude, {1, 6, 7}, 2, testing::random_vector(84, 42),
                                 testing::make_context(), testing::Tolerance{});
  GlobalAvgPool2d global;
  testing::check_layer_gradients(global, {3, 4, 5}, 2, testing::random_vector(120, 43),
                                 testing::make_context(), testing::Tolerance{});
}

// Values a shuffled ramp 0.1 apart: no window has a tie within the step of 0.01, so max
// pooling is linear near x and the default step is exact.
TEST(MaxPool2d, GradientsOverlappingPaddedCeil) {
  MaxPool2d layer(Pool2dOptions{.kernel_h = 3,
                                .kernel_w = 3,
                                .stride_h = 2,
                                .stride_w = 2,
                                .pad_h = 1,
                                .pad_w = 1,
                                .ceil_mode = true,
                                .count_include_pad = true});
  EXPECT_EQ(layer.build({2, 6, 7}), (Shape{2, 4, 4}));
  testing::check_layer_gradients(layer, {2, 6, 7}, 2, distinct_values(168, 44),
                                 testing::make_context(), testing::Tolerance{});
}

TEST(Pool2d, ShapesFollowPyTorch) {
  // H, ceil: (5 + 2 - 2 + 1) / 2 + 1 = 4, but the 4th window would start at (4 - 1) * 2 = 6,
  // in the bottom padding (6 >= 5 + 1): dropped, so 3. W: (4 + 2 - 2 + 1) / 2 + 1 = 3.
  AvgPool2d a(Pool2dOptions{.kernel_h = 2,
                            .kernel_w = 2,
                            .stride_h = 2,
                            .stride_w = 2,
                            .pad_h = 1,
                            .pad_w = 1,
                            .ceil_mode = true,
                            .count_include_pad = true});
  EXPECT_EQ(a.build({1, 5, 4}), (Shape{1, 3, 3}));
  EXPECT_EQ(a.kind(), "AvgPool2d");
  MaxPool2d m(2);
  EXPECT_EQ(m.build({3, 7, 8}), (Shape{3, 3, 4}));
  EXPECT_EQ(m.describe(), "MaxPool2d(2)");
  GlobalAvgPool2d g;
  EXPECT_EQ(g.build({5, 3, 2}), (Shape{5}));
  EXPECT_EQ(g.kind(), "GlobalAvgPool2d");
}

TEST(Pool2d, BadConfigsNameTheLayer) {
  // Padding over half the window (PyTorch refuses it too).
  expect_config_error(
      [] {
        AvgPool2d(Pool2dOptions{.kernel_h = 2,
                                .kernel_w = 2,
                                .stride_h = 2,
                                .stride_w = 2,
                                .pad_h = 2,
                                .pad_w = 0,
                                .ceil_mode = false,
                                .count_include_pad = true});
      },
      "AvgPool2d");
  expect_config_error([] { MaxPool2d(0); }, "MaxPool2d");
  MaxPool2d m(4);
  expect_config_error([&] { m.build({1, 3, 8}); }, "MaxPool2d(4)");  // window larger than H
  expect_config_error([&] { m.build({64}); }, "MaxPool2d(4)");       // wrong rank
  GlobalAvgPool2d g;
  expect_config_error([&] { g.build({4, 4}); }, "GlobalAvgPool2d");
}

}  // namespace
}  // namespace loom::nn
