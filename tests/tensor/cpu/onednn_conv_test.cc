// The oneDNN convolution path of the CPU backend: primitives cached once per geometry, every
// geometry (grouped, dilated, no bias) equal to a direct convolution, and the Backend defaults
// (the im2col path other backends fall back on) equal to it where they apply.
#include "loom/tensor/cpu/onednn_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/tensor/cpu/depthwise_weight_grad.h"
#include "tensor/random_vector.h"

namespace loom {
namespace {

using loom::testing::random_vector;

ConvGeometry geometry(int64_t batch, int64_t in_c, int64_t hw, int64_t out_c, int64_t k,
                      int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  const int64_t out = (hw + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  return ConvGeometry{.batch = batch,
                      .in_c = in_c,
                      .in_h = hw,
                      .in_w = hw,
                      .out_c = out_c,
                      .out_h = out,
                      .out_w = out,
                      .kernel_h = k,
                      .kernel_w = k,
                      .stride_h = stride,
                      .stride_w = stride,
                      .pad_h = pad,
                      .pad_w = pad,
                      .dilation_h = dilation,
                      .dilation_w = dilation,
                      .groups = groups};
}

// Direct convolution in double.
std::vector<float> direct(const ConvGeometry& g, const std::vector<float>& x,
                          const std::vector<float>& w, const float* bias) {
  std::vector<float> y(size_t(g.batch * g.out_c * g.out_h * g.out_w));
  const int64_t icg = g.in_c / g.groups, ocg = g.out_c / g.groups;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t o = 0; o < g.out_c; ++o)
      for (int64_t oy = 0; oy < g.out_h; ++oy)
        for (int64_t ox = 0; ox < g.out_w; ++ox) {
          double acc = bias ? bias[o] : 0.0;
          for (int64_t c = 0; c < icg; ++c)
            for (int64_t ky = 0; ky < g.kernel_h; ++ky)
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
                const int64_t ix = ox * g.stride_w - g.pad_w + kx * g.dilation_w;
                if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;
                const int64_t ic = (o / ocg) * icg + c;
                acc += double(w[size_t(((o * icg + c) * g.kernel_h + ky) * g.kernel_w + kx)]) *
                       x[size_t(((n * g.in_c + ic) * g.in_h + iy) * g.in_w + ix)];
              }
          y[size_t(((n * g.out_c + o) * g.out_h + oy) * g.out_w + ox)] = float(acc);
        }
  return y;
}

TEST(OnednnConv, ForwardMatchesDirectConvolutionForEveryOption) {
  CpuBackend be;
  for (const ConvGeometry& g :
       {geometry(2, 3, 7, 4, 3, 2, 1, 1, 1), geometry(1, 4, 8, 6, 3, 1, 2, 2, 2),
        geometry(3, 4, 6, 4, 3, 1, 1, 1, 4), geometry(2, 1, 5, 2, 5, 1, 2, 1, 1)}) {
    const auto x = random_vector(g.batch * g.in_c * g.in_h * g.in_w, 1);
    const auto w = random_vector(g.out_c * g.in_c / g.groups * g.kernel_h * g.kernel_w, 2);
    const auto b = random_vector(g.out_c, 3);
    for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> y(size_t(g.batch * g.out_c * g.out_h * g.out_w), 7.0f);
      be.conv2d_forward(g, x.data(), w.data(), bias, y.data());
      const auto want = direct(g, x, w, bias);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5) << "groups " << g.groups << " dilation " << g.dilation_h
                                         << " bias " << (bias != nullptr);
    }
  }
}

// The im2col default (what the CUDA backend runs) and oneDNN agree on the square geometry.
TEST(OnednnConv, BackendDefaultsAgreeWithOnednn) {
  CpuBackend be;
  Backend& base = be;
  const ConvGeometry g = geometry(2, 3, 6, 4, 3, 2, 1, 1, 1);
  const auto x = random_vector(2 * 3 * 36, 4), w = random_vector(4 * 3 * 9, 5);
  const auto b = random_vector(4, 6);
  const int64_t ny = g.batch * g.out_c * g.out_h * g.out_w;
  const auto dy = random_vector(ny, 7);
  std::vector<float> y1(static_cast<size_t>(ny)), y2(static_cast<size_t>(ny)), dx1(x.size()),
      dx2(x.size());
  std::vector<float> dw1(w.size()), dw2(w.size()), db1(4), db2(4);
  be.conv2d_forward(g, x.data(), w.data(), b.data(), y1.data());
  base.Backend::conv2d_forward(g, x.data(), w.data(), b.data(), y2.data());
  be.conv2d_backward_data(g, w.data(), dy.data(), dx1.data());
  base.Backend::conv2d_backward_data(g, w.data(), dy.data(), dx2.data());
  be.conv2d_backward_weights(g, x.data(), dy.data(), dw1.data(), db1.data());
  base.Backend::conv2d_backward_weights(g, x.data(), dy.data(), dw2.data(), db2.data());
  for (size_t i = 0; i < y1.size(); ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << i;
  for (size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx1[i], dx2[i], 1e-5) << i;
  for (size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw1[i], dw2[i], 1e-4) << i;
  for (size_t i = 0; i < db1.size(); ++i) EXPECT_NEAR(db1[i], db2[i], 1e-4) << i;
  // Other geometries are not the default's: a clear error naming the op and the backend.
  try {
    base.Backend::conv2d_forward(geometry(1, 2, 6, 2, 3, 1, 1, 1, 2), x.data(), w.data(), nullptr,
                                 y2.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not available on the cpu"), std::string::npos)
        << e.what();
  }
}

// The combined backward gives the two separate ops' results bit for bit, with and without dx
// and bias, on geometries oneDNN runs in its blocked layout.
TEST(OnednnConv, CombinedBackwardMatchesSeparateOps) {
  CpuBackend be;
  for (const ConvGeometry& g :
       {geometry(3, 16, 9, 32, 3, 1, 1, 1, 1), geometry(2, 32, 8, 16, 1, 2, 0, 1, 1)}) {
    const int64_t nx = g.batch * g.in_c * g.in_h * g.in_w;
    const int64_t ny = g.batch * g.out_c * g.out_h * g.out_w;
    const auto x = random_vector(nx, 11),
               w = random_vector(g.out_c * g.in_c * g.kernel_h * g.kernel_w, 12);
    const auto b = random_vector(g.out_c, 13), dy = random_vector(ny, 14);
    std::vector<float> y(static_cast<size_t>(ny));
    for (const bool bias : {false, true})
      for (const bool data : {false, true}) {
        be.conv2d_forward(g, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
        std::vector<float> dx1(x.size(), 1.0f), dx2(x.size(), 2.0f), dw1(w.size()), dw2(w.size());
        std::vector<float> db1(size_t(g.out_c)), db2(size_t(g.out_c));
        be.conv2d_backward_weights(g, x.data(), dy.data(), dw1.data(), bias ? db1.data() : nullptr);
        if (data) be.conv2d_backward_data(g, w.data(), dy.data(), dx1.data());
        be.conv2d_backward(g, x.data(), w.data(), dy.data(), data ? dx2.data() : nullptr,
                           dw2.data(), bias ? db2.data() : nullptr);
        EXPECT_EQ(dw1, dw2) << "bias " << bias << " data " << data;
        EXPECT_EQ(db1, db2) << "bias " << bias << " data " << data;
        if (data)
          EXPECT_EQ(dx1, dx2) << "bias " << bias;
        else
          EXPECT_EQ(dx2, std::vector<float>(x.size(), 2.0f)) << "dx untouched";
      }
  }
}

// A depthwise convolution's weight and bias gradient, the backend's (oneDNN's kernel, or the
// hand-written loop where oneDNN would fall back to a GEMM per channel: maps smaller than the
// kernel, MobileNetV2's last layers at 64 x 64) and the loop's own, against the direct sums in
// double, on maps down to 1 x 1, strided and dilated, through both backward entry points.
TEST(OnednnConv, DepthwiseWeightGradientMatchesTheDirectSums) {
  CpuBackend be;
  for (const ConvGeometry& g :
       {geometry(4, 24, 2, 24, 3, 1, 1, 1, 24), geometry(3, 16, 1, 16, 3, 1, 1, 1, 16),
        geometry(2, 8, 3, 8, 3, 2, 1, 1, 8), geometry(2, 16, 9, 16, 3, 1, 1, 1, 16),
        geometry(2, 8, 7, 8, 5, 1, 4, 2, 8)}) {
    const int64_t nx = g.batch * g.in_c * g.in_h * g.in_w;
    const int64_t ny = g.batch * g.out_c * g.out_h * g.out_w;
    const int64_t taps = g.kernel_h * g.kernel_w;
    const auto x = random_vector(nx, 21), w = random_vector(g.out_c * taps, 22);
    const auto dy = random_vector(ny, 23);
    std::vector<double> want(size_t(g.out_c * taps)), want_bias(size_t(g.out_c));
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t c = 0; c < g.out_c; ++c)
        for (int64_t oy = 0; oy < g.out_h; ++oy)
          for (int64_t ox = 0; ox < g.out_w; ++ox) {
            const double d = dy[size_t(((n * g.out_c + c) * g.out_h + oy) * g.out_w + ox)];
            want_bias[size_t(c)] += d;
            for (int64_t ky = 0; ky < g.kernel_h; ++ky)
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
                const int64_t ix = ox * g.stride_w - g.pad_w + kx * g.dilation_w;
                if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;
                want[size_t(c * taps + ky * g.kernel_w + kx)] +=
                    d * x[size_t(((n * g.in_c + c) * g.in_h + iy) * g.in_w + ix)];
              }
          }
    std::vector<float> y(static_cast<size_t>(ny)), dx(x.size());
    std::vector<float> dw1(w.size(), 7.0f), dw2(w.size(), 7.0f), dw3(w.size(), 7.0f);
    std::vector<float> db1(size_t(g.out_c), 7.0f), db2 = db1, db3 = db1;
    be.conv2d_forward(g, x.data(), w.data(), nullptr, y.data());
    be.conv2d_backward_weights(g, x.data(), dy.data(), dw1.data(), db1.data());
    be.conv2d_backward(g, x.data(), w.data(), dy.data(), dx.data(), dw2.data(), db2.data());
    cpu::depthwise_weight_grad(g, x.data(), dy.data(), dw3.data(), db3.data());
    for (const auto* dw : {&dw1, &dw2, &dw3})
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR((*dw)[i], want[i], 1e-4) << g.in_h << " x " << g.in_w << ", tap " << i;
    for (const auto* db : {&db1, &db2, &db3})
      for (size_t i = 0; i < want_bias.size(); ++i)
        ASSERT_NEAR((*db)[i], want_bias[i], 1e-4) << g.in_h << " x " << g.in_w << ", channel " << i;
    // dx through the combined backward is the direct convolution's transpose: checked against
    // the separate op.
    std::vector<float> dx_alone(x.size());
    be.conv2d_backward_data(g, w.data(), dy.data(), dx_alone.data());
    EXPECT_EQ(dx, dx_alone) << g.in_h << " x " << g.in_w;
  }
}

// A training forward keeps x in oneDNN's layout for the next backward on it: the results are
// the plain ops', for each of two layers of one geometry, and a second backward (nothing kept
// any more) or a new x after a new training forward give the plain ops' results too.
TEST(OnednnConv, TrainingForwardKeepsInputForBackward) {
  CpuBackend be;
  const ConvGeometry g = geometry(2, 16, 8, 16, 3, 1, 1, 1, 1);
  const int64_t nx = g.batch * g.in_c * g.in_h * g.in_w;
  const int64_t ny = g.batch * g.out_c * g.out_h * g.out_w;
  auto x1 = random_vector(nx, 21), x2 = random_vector(nx, 22);
  const auto w = random_vector(g.out_c * g.in_c * 9, 23), dy = random_vector(ny, 24);
  const auto check = [&](const std::vector<float>& x, const char* what) {
    std::vector<float> dx1(x.size()), dx2(x.size()), dw1(w.size()), dw2(w.size());
    be.conv2d_backward_weights(g, x.data(), dy.data(), dw1.data(), nullptr);
    be.conv2d_backward_data(g, w.data(), dy.data(), dx1.data());
    be.conv2d_backward(g, x.data(), w.data(), dy.data(), dx2.data(), dw2.data(), nullptr);
    EXPECT_EQ(dw1, dw2) << what;
    EXPECT_EQ(dx1, dx2) << what;
  };
  std::vector<float> y1(static_cast<size_t>(ny)), y2(static_cast<size_t>(ny));
  be.conv2d_forward_training(g, x1.data(), w.data(), nullptr, y1.data());
  be.conv2d_forward_training(g, x2.data(), w.data(), nullptr, y2.data());
  std::vector<float> want(static_cast<size_t>(ny));
  be.conv2d_forward(g, x1.data(), w.data(), nullptr, want.data());
  EXPECT_EQ(y1, want);
  check(x2, "second layer");
  check(x1, "first layer");
  check(x1, "again, nothing kept");
  const auto fresh = random_vector(nx, 25);  // new values in the same storage, a new forward
  std::copy(fresh.begin(), fresh.end(), x1.begin());
  be.conv2d_forward_training(g, x1.data(), w.data(), nullptr, y1.data());
  check(x1, "new values");
}

TEST(OnednnConv, PrimitivesAreCachedPerGeometry) {
  CpuBackend be;
  // A fresh thread has an empty cache.
  std::thread([&] {
    const ConvGeometry g = geometry(2, 2, 5, 3, 3, 1, 1, 1, 1);
    const auto x = random_vector(2 * 2 * 25, 8), w = random_vector(3 * 2 * 9, 9);
    std::vector<float> y(size_t(2 * 3 * 25));
    EXPECT_EQ(cpu::onednn_conv_cached_geometries(), 0);
    be.conv2d_forward(g, x.data(), w.data(), nullptr, y.data());
    be.conv2d_forward(g, x.data(), w.data(), nullptr, y.data());
    EXPECT_EQ(cpu::onednn_conv_cached_geometries(), 1);
    ConvGeometry other = g;
    other.batch = 1;  // a last short batch is a geometry of its own
    be.conv2d_forward(other, x.data(), w.data(), nullptr, y.data());
    EXPECT_EQ(cpu::onednn_conv_cached_geometries(), 2);
  }).join();
}

}  // namespace
}  // namespace loom
