// Conv2d with its full options (rectangular kernel, stride, padding, dilation, groups, no
// bias) against PyTorch's values (tests/data/nn, make_layer_references.py), by finite
// differences, and its configuration errors.
#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/nn/layers/conv2d.h"
#include "nn/grad_check.h"
#include "nn/reference_data.h"

namespace loom::nn {
namespace {

using testing::expect_config_error;
using testing::expect_matches;
using testing::kBilinear;
using testing::load_reference;
using testing::Reference;

Conv2dOptions options_of(const Reference& ref) {
  return Conv2dOptions{.in_channels = ref.iattr("in_channels"),
                       .out_channels = ref.iattr("out_channels"),
                       .kernel_h = ref.iattr("kernel_h"),
                       .kernel_w = ref.iattr("kernel_w"),
                       .stride_h = ref.iattr("stride_h"),
                       .stride_w = ref.iattr("stride_w"),
                       .pad_h = ref.iattr("pad_h"),
                       .pad_w = ref.iattr("pad_w"),
                       .dilation_h = ref.iattr("dilation_h"),
                       .dilation_w = ref.iattr("dilation_w"),
                       .groups = ref.iattr("groups"),
                       .bias = ref.iattr("bias") != 0};
}

class Conv2dReference : public ::testing::TestWithParam<const char*> {};

TEST_P(Conv2dReference, ForwardAndGradientsMatchPyTorch) {
  const Reference ref = load_reference(GetParam());
  const Conv2dOptions o = options_of(ref);
  Conv2d layer(o);
  std::vector<std::string> keys{"weight"};
  if (o.bias) keys.push_back("bias");
  const auto run = testing::run_layer(layer, ref, testing::join(ref, keys), {});
  const auto& y = ref.tensor("y");
  EXPECT_EQ(run.out_shape, Shape(y.shape.begin() + 1, y.shape.end()));
  expect_matches("y", run.y, y);
  expect_matches("dx", run.dx, ref.tensor("dx"));
  const int64_t nw = int64_t(ref.tensor("weight").values.size());
  expect_matches("dweight", {run.dparams.begin(), run.dparams.begin() + nw}, ref.tensor("dweight"));
  if (o.bias) {
    expect_matches("dbias", {run.dparams.begin() + nw, run.dparams.end()}, ref.tensor("dbias"));
  }
}

INSTANTIATE_TEST_SUITE_P(PyTorch, Conv2dReference,
                         ::testing::Values("conv2d_rect", "conv2d_dilated", "conv2d_groups",
                                           "conv2d_depthwise_nobias", "conv2d_square"));

// Linear in x and in the weights separately (see conv2d_test.cc): a wide step, tight tolerance.
TEST(Conv2dOptions, GradientsGroupedDilatedRectangular) {
  Conv2d layer(Conv2dOptions{.in_channels = 4,
                             .out_channels = 6,
                             .kernel_h = 3,
                             .kernel_w = 2,
                             .stride_h = 2,
                             .stride_w = 1,
                             .pad_h = 2,
                             .pad_w = 1,
                             .dilation_h = 2,
                             .dilation_w = 1,
                             .groups = 2,
                             .bias = true});
  testing::check_layer_gradients(layer, {4, 6, 5}, 2, testing::random_vector(2 * 4 * 6 * 5, 31),
                                 testing::make_context(), kBilinear);
}

TEST(Conv2dOptions, GradientsWithoutBias) {
  Conv2d layer(Conv2dOptions{.in_channels = 2,
                             .out_channels = 3,
                             .kernel_h = 1,
                             .kernel_w = 3,
                             .stride_h = 1,
                             .stride_w = 2,
                             .pad_h = 0,
                             .pad_w = 1,
                             .dilation_h = 1,
                             .dilation_w = 1,
                             .groups = 1,
                             .bias = false});
  EXPECT_EQ(layer.num_params(), 3 * 2 * 3);
  EXPECT_EQ(layer.param_matrices().size(), 1u);
  testing::check_layer_gradients(layer, {2, 4, 5}, 3, testing::random_vector(3 * 40, 32),
                                 testing::make_context(), kBilinear);
}

TEST(Conv2dOptions, ShapesParamsAndFlops) {
  Conv2d layer(Conv2dOptions{.in_channels = 4,
                             .out_channels = 8,
                             .kernel_h = 3,
                             .kernel_w = 5,
                             .stride_h = 2,
                             .stride_w = 1,
                             .pad_h = 1,
                             .pad_w = 2,
                             .dilation_h = 1,
                             .dilation_w = 2,
                             .groups = 4,
                             .bias = true});
  // h: (9 + 2 - 3) / 2 + 1 = 5; w: extent 2 * 4 + 1 = 9, (10 + 4 - 9) / 1 + 1 = 6
  EXPECT_EQ(layer.build({4, 9, 10}), (Shape{8, 5, 6}));
  EXPECT_EQ(layer.num_params(), 8 * 1 * 3 * 5 + 8);
  EXPECT_EQ(layer.param_matrices(), (std::vector<std::array<int64_t, 2>>{{8, 15}, {1, 8}}));
  EXPECT_EQ(layer.flops_per_sample(), 2 * 8 * 1 * 3 * 5 * 5 * 6);
  EXPECT_EQ(layer.kind(), "Conv2d");
}

// The message must name the layer so a model's config error points at it.
TEST(Conv2dOptions, BadConfigsNameTheLayer) {
  expect_config_error(
      [] {
        Conv2d c(Conv2dOptions{.in_channels = 3,
                               .out_channels = 4,
                               .kernel_h = 3,
                               .kernel_w = 3,
                               .stride_h = 1,
                               .stride_w = 1,
                               .pad_h = 0,
                               .pad_w = 0,
                               .dilation_h = 1,
                               .dilation_w = 1,
                               .groups = 2,
                               .bias = true});
      },
      "Conv2d(3 -> 4");
  // Dilation 3 makes a 3-wide kernel 7 wide: larger than 5 + 2 * 0.
  Conv2d dilated(Conv2dOptions{.in_channels = 1,
                               .out_channels = 1,
                               .kernel_h = 3,
                               .kernel_w = 3,
                               .stride_h = 1,
                               .stride_w = 1,
                               .pad_h = 0,
                               .pad_w = 0,
                               .dilation_h = 1,
                               .dilation_w = 3,
                               .groups = 1,
                               .bias = true});
  expect_config_error([&] { dilated.build({1, 8, 5}); }, "[1, 8, 5]");
  Conv2d c(3, 4, 3);
  expect_config_error([&] { c.build({3, 8}); }, "Conv2d(3 -> 4");         // wrong rank
  expect_config_error([&] { c.build({4, 8, 8}); }, "Conv2d(3 -> 4");      // wrong channels
  expect_config_error([] { Conv2d(Conv2dOptions{}); }, "Conv2d(0 -> 0");  // no channels
}

}  // namespace
}  // namespace loom::nn
