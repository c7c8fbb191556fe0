// Conv2d and MaxPool2d: gradient checks and forward values against a direct convolution.
#include "loom/nn/layers/conv2d.h"

#include <gtest/gtest.h>

#include <numeric>

#include "loom/core/error.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::distinct_values;
using testing::kBilinear;
using testing::make_context;
using testing::random_vector;
using testing::Tolerance;

// Linear in x and in the weights separately: a wide step has no truncation error and
// divides the float rounding of the forward by more.
TEST(Conv2d, GradientsWithPaddingAndStrideTwo) {
  // [2, 5, 6] -> [3, 3, 3]: the stride leaves the last padded column unused.
  Conv2d layer(2, 3, 3, 2, 1);
  check_layer_gradients(layer, {2, 5, 6}, 2, random_vector(2 * 2 * 5 * 6, 10), make_context(),
                        kBilinear);
}

TEST(Conv2d, GradientsUnitStrideWidePadding) {
  Conv2d layer(1, 2, 5, 1, 2);  // the zoo's CNN block shape
  check_layer_gradients(layer, {1, 6, 6}, 3, random_vector(3 * 36, 11), make_context(), kBilinear);
}

// Direct (six-loop) convolution as the forward reference.
TEST(Conv2d, ForwardMatchesDirectConvolution) {
  const int64_t ic = 2, oc = 3, k = 3, stride = 2, pad = 1, h = 7, w = 6, batch = 2;
  Conv2d layer(ic, oc, k, stride, pad);
  const Shape out = layer.build({ic, h, w});
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  ASSERT_EQ(out, (Shape{oc, oh, ow}));
  std::vector<float> params = random_vector(layer.num_params(), 12), grads(params.size());
  layer.bind(params.data(), grads.data());
  const std::vector<float> x = random_vector(batch * ic * h * w, 13);
  std::vector<float> y(size_t(batch * oc * oh * ow));
  layer.forward(make_context(), x.data(), y.data(), batch);
  const float* bias = params.data() + oc * ic * k * k;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = bias[o];
          for (int64_t c = 0; c < ic; ++c)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                acc += double(params[size_t(((o * ic + c) * k + ky) * k + kx)]) *
                       x[size_t(((n * ic + c) * h + iy) * w + ix)];
              }
          EXPECT_NEAR(y[size_t(((n * oc + o) * oh + oy) * ow + ox)], acc, 1e-5)
              << n << " " << o << " " << oy << " " << ox;
        }
}

TEST(Conv2d, BadShapesAreConfigErrors) {
  EXPECT_THROW(Conv2d(0, 3, 3), ConfigError);
  EXPECT_THROW(Conv2d(1, 3, 3, 0), ConfigError);
  EXPECT_THROW(Conv2d(1, 3, 3, 1, -1), ConfigError);
  Conv2d c(3, 4, 3);
  EXPECT_THROW(c.build({2, 8, 8}), ConfigError);    // wrong channel count
  EXPECT_THROW(c.build({3 * 8 * 8}), ConfigError);  // not an image
  Conv2d big(1, 1, 5);
  EXPECT_THROW(big.build({1, 3, 3}), ConfigError);  // kernel larger than the image
}

// Values are a shuffled ramp 0.1 apart, so no window has a tie within the step of 0.01.
TEST(MaxPool2d, GradientsWithoutTies) {
  MaxPool2d layer(2);
  check_layer_gradients(layer, {2, 4, 6}, 2, distinct_values(96, 14), make_context(), Tolerance{});
}

TEST(MaxPool2d, GradientsOddSizeAndWindowThree) {
  // 5x7 with window 2: the last row and column feed no output and get zero gradient.
  MaxPool2d two(2);
  check_layer_gradients(two, {1, 5, 7}, 2, distinct_values(70, 15), make_context(), Tolerance{});
  MaxPool2d three(3);
  check_layer_gradients(three, {2, 6, 6}, 1, distinct_values(72, 16), make_context(), Tolerance{});
}

TEST(MaxPool2d, ShapeAndBadConfig) {
  MaxPool2d p(2);
  EXPECT_EQ(p.build({3, 7, 8}), (Shape{3, 3, 4}));
  EXPECT_THROW(MaxPool2d(0), ConfigError);
  MaxPool2d q(4);
  EXPECT_THROW(q.build({1, 3, 8}), ConfigError);
  EXPECT_THROW(q.build({64}), ConfigError);
}

}  // namespace
}  // namespace loom::nn
