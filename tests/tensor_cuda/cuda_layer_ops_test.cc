// The CNN layer ops of the Backend interface (activations, convolution, pooling, batch norm)
// on the CUDA backend against the CPU backend, forward and backward, with the same inputs:
// bit-exact where the CUDA kernels compute the CPU's arithmetic in the CPU's order (ReLU,
// LeakyReLU, pooling values, argmax and gradients), within a named budget elsewhere; then one
// training step of a small graph using all of them. Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "loom/core/config.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cudnn_conv.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

TEST(CudaLayerOps, ActivationsMatchCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 20011;
  auto x = random_floats(size_t(n), 40, -6.0f, 6.0f);
  // Signed zeros, far tails (exp overflows to inf, sigmoid to 0 or 1) and a large value.
  const float specials[] = {0.0f, -0.0f, 30.0f, -30.0f, 90.0f, -90.0f, 1e-30f, -1e-30f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  auto g = random_floats(size_t(n), 41);
  auto dx_in = upload(gpu(), x), dg = upload(gpu(), g);
  for (Activation kind : {Activation::kRelu, Activation::kLeakyRelu, Activation::kGelu,
                          Activation::kSilu, Activation::kTanh, Activation::kSigmoid,
                          Activation::kRelu6, Activation::kHardSigmoid, Activation::kHardSwish}) {
    SCOPED_TRACE(activation_name(kind));
    const float alpha = 0.05f;
    std::vector<float> y(size_t(n), 0.0f), dx(size_t(n), 0.0f);
    DeviceBuffer<float> dy = guarded<float>(gpu(), size_t(n));
    DeviceBuffer<float> ddx = guarded<float>(gpu(), size_t(n));
    cpu().activation_forward(kind, alpha, x.data(), y.data(), n);
    gpu().activation_forward(kind, alpha, dx_in.data(), dy.data(), n);
    const bool exact = kind == Activation::kRelu || kind == Activation::kLeakyRelu;
    if (exact) {
      EXPECT_BITS_EQ(download(gpu(), dy, size_t(n)), y);
    } else {
      EXPECT_NMSE_LE(download(gpu(), dy, size_t(n)), y, kNmseElementwise);
    }
    EXPECT_CANARY(gpu(), dy, n);
    // Backward from the same y on both (the CPU's), so only the derivative is compared.
    auto dy_cpu = upload(gpu(), y);
    cpu().activation_backward(kind, alpha, x.data(), y.data(), g.data(), dx.data(), n);
    gpu().activation_backward(kind, alpha, dx_in.data(), dy_cpu.data(), dg.data(), ddx.data(), n);
    if (exact) {
      EXPECT_BITS_EQ(download(gpu(), ddx, size_t(n)), dx);
    } else {
      EXPECT_NMSE_LE(download(gpu(), ddx, size_t(n)), dx, kNmseElementwise);
    }
    EXPECT_CANARY(gpu(), ddx, n);
  }
}

ConvGeometry conv(int64_t batch, int64_t in_c, int64_t in_h, int64_t in_w, int64_t out_c,
                  int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                  int64_t dh, int64_t dw, int64_t groups) {
  ConvGeometry g;
  g.batch = batch, g.in_c = in_c, g.in_h = in_h, g.in_w = in_w, g.out_c = out_c;
  g.kernel_h = kh, g.kernel_w = kw, g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw;
  g.dilation_h = dh, g.dilation_w = dw, g.groups = groups;
  g.out_h = (in_h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  g.out_w = (in_w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return g;
}

struct ConvCase {
  ConvGeometry g;
  bool bias;
};

std::string describe(const ConvGeometry& g) {
  return fmt::format(
      "batch {} in {}x{}x{} out {}x{}x{} kernel {}x{} stride {}x{} pad {}x{} dilation {}x{} "
      "groups {}",
      g.batch, g.in_c, g.in_h, g.in_w, g.out_c, g.out_h, g.out_w, g.kernel_h, g.kernel_w,
      g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups);
}

// One geometry through conv2d_forward, conv2d_backward_data and conv2d_backward_weights on
// `gpu` and on the CPU backend (oneDNN), with the same inputs; outputs start from garbage (all
// three overwrite) and carry canaries. Returns the GPU's dw and dbias for determinism checks.
std::vector<float> expect_conv_matches_cpu(Backend& gpu, const ConvCase& cs, uint64_t seed,
                                           double budget, double bias_budget) {
  const ConvGeometry& g = cs.g;
  SCOPED_TRACE(describe(g) + (cs.bias ? ", bias" : ", no bias"));
  const size_t nx = size_t(g.batch * g.in_c * g.in_h * g.in_w);
  const size_t ny = size_t(g.batch * g.out_c * g.out_h * g.out_w);
  const size_t nw = size_t(g.out_c * (g.in_c / g.groups) * g.kernel_h * g.kernel_w);
  auto x = random_floats(nx, seed++), w = random_floats(nw, seed++);
  auto b = random_floats(size_t(g.out_c), seed++), gy = random_floats(ny, seed++);
  auto dxg = upload(gpu, x), dwg = upload(gpu, w), dbg = upload(gpu, b), dgy = upload(gpu, gy);

  std::vector<float> y = random_floats(ny, seed++);
  DeviceBuffer<float> dy = upload_guarded(gpu, y);
  cpu().conv2d_forward(g, x.data(), w.data(), cs.bias ? b.data() : nullptr, y.data());
  gpu.conv2d_forward(g, dxg.data(), dwg.data(), cs.bias ? dbg.data() : nullptr, dy.data());
  EXPECT_NMSE_LE(download(gpu, dy, ny), y, budget);
  EXPECT_CANARY(gpu, dy, ny);

  std::vector<float> dx = random_floats(nx, seed++);
  DeviceBuffer<float> ddx = upload_guarded(gpu, dx);
  cpu().conv2d_backward_data(g, w.data(), gy.data(), dx.data());
  gpu.conv2d_backward_data(g, dwg.data(), dgy.data(), ddx.data());
  EXPECT_NMSE_LE(download(gpu, ddx, nx), dx, budget);
  EXPECT_CANARY(gpu, ddx, nx);

  std::vector<float> dw = random_floats(nw, seed++), dbias = random_floats(b.size(), seed++);
  DeviceBuffer<float> ddw = upload_guarded(gpu, dw), ddbias = upload_guarded(gpu, dbias);
  const std::vector<float> dbias_before = dbias;
  cpu().conv2d_backward_weights(g, x.data(), gy.data(), dw.data(),
                                cs.bias ? dbias.data() : nullptr);
  gpu.conv2d_backward_weights(g, dxg.data(), dgy.data(), ddw.data(),
                              cs.bias ? ddbias.data() : nullptr);
  std::vector<float> got = download(gpu, ddw, nw);
  EXPECT_NMSE_LE(got, dw, budget);
  EXPECT_CANARY(gpu, ddw, nw);
  const std::vector<float> got_bias = download(gpu, ddbias, b.size());
  if (cs.bias) {
    EXPECT_NMSE_LE(got_bias, dbias, bias_budget);
  } else {
    EXPECT_BITS_EQ(got_bias, dbias_before);  // not asked for: untouched
  }
  EXPECT_CANARY(gpu, ddbias, b.size());
  got.insert(got.end(), got_bias.begin(), got_bias.end());
  return got;
}

ConvCase conv_case(ConvGeometry g, bool bias) {
  return {g, bias};
}

// The default engine (cuDNN where it runs, else loom's kernels).
TEST(CudaLayerOps, ConvolutionForwardAndBackwardMatchCpu) {
  LOOM_REQUIRE_GPU();
  const ConvCase cases[] = {
      // rectangular kernel, stride and padding, dilation, two groups
      conv_case(conv(2, 4, 9, 7, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2), true),
      // 1x1, stride 1, no padding: the direct path (no im2col)
      conv_case(conv(3, 3, 8, 8, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1), true),
      // depthwise, dilated, padding wider than the kernel reaches
      conv_case(conv(1, 6, 10, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6), false),
      // 1x1 with stride 2: im2col again
      conv_case(conv(2, 4, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1), false),
      // a large stride that skips input pixels, square kernel the size of the image
      conv_case(conv(2, 2, 5, 5, 3, 5, 5, 3, 3, 2, 2, 1, 1, 1), true),
  };
  const bool dnn = dynamic_cast<CudaBackend&>(gpu()).conv_engine() != "loom";
  uint64_t seed = 50;
  for (const ConvCase& cs : cases) {
    expect_conv_matches_cpu(gpu(), cs, seed, dnn ? kNmseCudnnConv : kNmseGemm,
                            dnn ? kNmseCudnnConv : kNmseReduction);
    seed += 10;
  }
}

// The geometries both convolution engines are checked on: stride 2, padding, dilation 2,
// groups 2 and depthwise, with and without bias, 1x1, 3x3 and 5x5 kernels, rectangular ones,
// and batches large enough for cuDNN's transform algorithms (FFT, Winograd).
std::vector<ConvCase> engine_cases() {
  return {
      conv_case(conv(2, 4, 9, 7, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2), true),      // rect, groups 2
      conv_case(conv(3, 3, 8, 8, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1), true),      // 1x1 direct
      conv_case(conv(2, 4, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1), false),     // 1x1 stride 2
      conv_case(conv(4, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1), true),   // 3x3 "same"
      conv_case(conv(2, 8, 16, 15, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1), false),   // 3x3 stride 2
      conv_case(conv(2, 6, 11, 13, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2), true),    // dilation 2, groups 2
      conv_case(conv(1, 6, 10, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6), false),   // depthwise, dilated
      conv_case(conv(2, 8, 9, 9, 8, 5, 5, 1, 1, 2, 2, 1, 1, 8), true),      // depthwise 5x5
      conv_case(conv(3, 16, 14, 14, 32, 5, 5, 1, 1, 2, 2, 1, 1, 1), true),  // 5x5
      conv_case(conv(2, 2, 5, 5, 3, 5, 5, 3, 3, 2, 2, 1, 1, 1), false),     // stride 3 > pixels
      conv_case(conv(32, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1), true),   // batch 32
  };
}

TEST(CudaLayerOps, ConvolutionOnLoomKernelsMatchesCpu) {
  LOOM_REQUIRE_GPU();
  CudaBackend be(0);
  be.set_conv_engine(CudaBackend::ConvEngine::kLoom);
  ASSERT_EQ(be.conv_engine(), "loom");
  EXPECT_EQ(be.name().find("cuDNN"), std::string::npos) << be.name();
  uint64_t seed = 500;
  for (const ConvCase& cs : engine_cases()) {
    expect_conv_matches_cpu(be, cs, seed, kNmseGemm, kNmseReduction);
    seed += 10;
  }
  EXPECT_EQ(be.cudnn_stats().calls, 0);
}

// cuDNN on every geometry (none declined, every call through cuDNN), and deterministic: the
// weight and bias gradients, the one place a cuDNN algorithm may use atomics, are the same
// bits on a second run.
TEST(CudaLayerOps, ConvolutionOnCudnnMatchesCpu) {
  LOOM_REQUIRE_GPU();
  CudaBackend be(0);
  try {
    be.set_conv_engine(CudaBackend::ConvEngine::kCudnn);
  } catch (const ConfigError& e) {
    // bench/gpu/check.sh counts this skip as expected only where loom_gpu_bench --parts info
    // found cuDNN unable to run.
    GTEST_SKIP() << "cuDNN cannot run here: " << e.what();
  }
  ASSERT_EQ(be.conv_engine().rfind("cudnn ", 0), 0u) << be.conv_engine();
  EXPECT_NE(be.name().find("cuDNN"), std::string::npos) << be.name();
  const std::vector<ConvCase> cases = engine_cases();
  uint64_t seed = 500;
  for (const ConvCase& cs : cases) {
    const auto first = expect_conv_matches_cpu(be, cs, seed, kNmseCudnnConv, kNmseCudnnConv);
    const auto again = expect_conv_matches_cpu(be, cs, seed, kNmseCudnnConv, kNmseCudnnConv);
    SCOPED_TRACE(describe(cs.g));
    EXPECT_BITS_EQ(again, first);
    seed += 10;
  }
  const cuda::CudnnStats st = be.cudnn_stats();
  EXPECT_EQ(st.declined, 0);
  EXPECT_EQ(st.calls, int64_t(6 * cases.size()));  // three ops, twice each
  EXPECT_EQ(st.plans, int64_t(cases.size()));      // one cached plan per geometry
  EXPECT_EQ(be.cudnn_unavailable(), "");
}

// Under kAuto a geometry cuDNN does not take runs on loom's kernels: an output size other
// than PyTorch's rule (here one row and column short of it, as a caller cropping the output
// would ask) is declined and counted, and the result is loom's.
TEST(CudaLayerOps, ConvolutionCudnnDeclinesAnOutputSizeItWouldNotCompute) {
  LOOM_REQUIRE_GPU();
  CudaBackend dnn(0), own(0);
  try {
    dnn.set_conv_engine(CudaBackend::ConvEngine::kCudnn);
  } catch (const ConfigError& e) {
    GTEST_SKIP() << "cuDNN cannot run here: " << e.what();
  }
  own.set_conv_engine(CudaBackend::ConvEngine::kLoom);
  ConvGeometry g = conv(2, 3, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  g.out_h -= 1;
  g.out_w -= 1;
  const size_t nx = size_t(g.batch * g.in_c * g.in_h * g.in_w);
  const size_t ny = size_t(g.batch * g.out_c * g.out_h * g.out_w);
  const size_t nw = size_t(g.out_c * g.in_c * g.kernel_h * g.kernel_w);
  const auto x = random_floats(nx, 610), w = random_floats(nw, 611);
  std::vector<float> got[2];
  int i = 0;
  for (CudaBackend* be : {&dnn, &own}) {
    auto dx = upload(*be, x), dw = upload(*be, w);
    DeviceBuffer<float> dy = guarded<float>(*be, ny);
    be->conv2d_forward(g, dx.data(), dw.data(), nullptr, dy.data());
    got[i++] = download(*be, dy, ny);
    EXPECT_CANARY(*be, dy, ny);
  }
  EXPECT_BITS_EQ(got[0], got[1]);
  EXPECT_EQ(dnn.cudnn_stats().declined, 1);
  EXPECT_EQ(dnn.cudnn_stats().calls, 0);
}

// PyTorch's output size: floor or ceil, and in ceil mode no window starting in the padding.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  int64_t o = (in + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

PoolGeometry pool(int64_t planes, int64_t in_h, int64_t in_w, int64_t kh, int64_t kw, int64_t sh,
                  int64_t sw, int64_t ph, int64_t pw, bool ceil_mode) {
  PoolGeometry g;
  g.planes = planes, g.in_h = in_h, g.in_w = in_w, g.kernel_h = kh, g.kernel_w = kw;
  g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw;
  g.out_h = pool_out(in_h, kh, sh, ph, ceil_mode);
  g.out_w = pool_out(in_w, kw, sw, pw, ceil_mode);
  return g;
}

std::vector<PoolGeometry> pool_cases() {
  return {pool(6, 9, 11, 3, 2, 2, 2, 1, 1, true),   // rectangular, padded, ceil mode
          pool(4, 7, 7, 3, 3, 1, 1, 1, 1, false),   // overlapping windows
          pool(5, 8, 9, 2, 2, 2, 2, 0, 0, false),   // the tiled 2x2 case (odd width: a column left)
          pool(3, 10, 6, 4, 3, 3, 2, 2, 1, true),   // stride < window in one axis, ceil mode
          pool(7, 5, 6, 5, 6, 5, 6, 0, 0, false)};  // one window per plane (global pooling)
}

std::string describe(const PoolGeometry& g) {
  return fmt::format("planes {} in {}x{} out {}x{} kernel {}x{} stride {}x{} pad {}x{}", g.planes,
                     g.in_h, g.in_w, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.stride_h,
                     g.stride_w, g.pad_h, g.pad_w);
}

TEST(CudaLayerOps, MaxPoolingIsBitExact) {
  LOOM_REQUIRE_GPU();
  uint64_t seed = 70;
  for (const PoolGeometry& g : pool_cases()) {
    SCOPED_TRACE(describe(g));
    const size_t nx = size_t(g.planes * g.in_h * g.in_w), ny = size_t(g.planes * g.out_h * g.out_w);
    auto x = random_floats(nx, seed++);
    // Ties (the first maximum wins) and a NaN (which wins).
    for (int64_t i = 0; i < g.in_w && i < 4; ++i) x[size_t(i)] = x[size_t(g.in_w + i)] = 2.0f;
    x[nx - 1] = std::numeric_limits<float>::quiet_NaN();
    auto dxg = upload(gpu(), x);
    std::vector<float> y(ny);
    std::vector<int32_t> arg(ny);
    DeviceBuffer<float> dy = guarded<float>(gpu(), ny);
    DeviceBuffer<int32_t> darg = guarded<int32_t>(gpu(), ny);
    cpu().maxpool2d_forward(g, x.data(), y.data(), arg.data());
    gpu().maxpool2d_forward(g, dxg.data(), dy.data(), darg.data());
    EXPECT_BITS_EQ(download(gpu(), dy, ny), y);
    EXPECT_BITS_EQ(download(gpu(), darg, ny), arg);
    EXPECT_CANARY(gpu(), dy, ny);
    EXPECT_CANARY(gpu(), darg, ny);

    auto gy = random_floats(ny, seed++);
    auto dgy = upload(gpu(), gy);
    std::vector<float> dx = random_floats(nx, seed++);  // overwritten
    DeviceBuffer<float> ddx = upload_guarded(gpu(), dx);
    cpu().maxpool2d_backward(g, gy.data(), arg.data(), dx.data());
    gpu().maxpool2d_backward(g, dgy.data(), darg.data(), ddx.data());
    EXPECT_BITS_EQ(download(gpu(), ddx, nx), dx);
    EXPECT_CANARY(gpu(), ddx, nx);
  }
}

TEST(CudaLayerOps, AveragePoolingIsBitExact) {
  LOOM_REQUIRE_GPU();
  uint64_t seed = 90;
  for (const PoolGeometry& g : pool_cases()) {
    for (bool include_pad : {true, false}) {
      SCOPED_TRACE(describe(g) + (include_pad ? " count_include_pad" : ""));
      const size_t nx = size_t(g.planes * g.in_h * g.in_w),
                   ny = size_t(g.planes * g.out_h * g.out_w);
      auto x = random_floats(nx, seed++);
      auto dxg = upload(gpu(), x);
      std::vector<float> y(ny);
      DeviceBuffer<float> dy = guarded<float>(gpu(), ny);
      cpu().avgpool2d_forward(g, include_pad, x.data(), y.data());
      gpu().avgpool2d_forward(g, include_pad, dxg.data(), dy.data());
      EXPECT_BITS_EQ(download(gpu(), dy, ny), y);
      EXPECT_CANARY(gpu(), dy, ny);

      auto gy = random_floats(ny, seed++);
      auto dgy = upload(gpu(), gy);
      std::vector<float> dx = random_floats(nx, seed++);  // overwritten
      DeviceBuffer<float> ddx = upload_guarded(gpu(), dx);
      cpu().avgpool2d_backward(g, include_pad, gy.data(), dx.data());
      gpu().avgpool2d_backward(g, include_pad, dgy.data(), ddx.data());
      EXPECT_BITS_EQ(download(gpu(), ddx, nx), dx);
      EXPECT_CANARY(gpu(), ddx, nx);
    }
  }
}

TEST(CudaLayerOps, BatchNormOpsMatchCpu) {
  LOOM_REQUIRE_GPU();
  const float eps = 1e-5f;
  for (auto [batch, channels, plane] :
       {std::tuple<int64_t, int64_t, int64_t>{4, 5, 37}, {3, 16, 1}, {2, 3, 28 * 28}}) {
    SCOPED_TRACE(testing::Message()
                 << "batch " << batch << " channels " << channels << " plane " << plane);
    const size_t n = size_t(batch * channels * plane), c = size_t(channels);
    // Off-centre values, so the shift matters.
    auto x = random_floats(n, 110, 2.0f, 4.0f), gy = random_floats(n, 111);
    auto dxg = upload(gpu(), x), dgy = upload(gpu(), gy);

    // Moments: plain, then shifted by the mean; either output may be absent.
    std::vector<float> sum(c), sumsq(c);
    DeviceBuffer<float> dsum = guarded<float>(gpu(), c), dsumsq = guarded<float>(gpu(), c);
    cpu().channel_moments(x.data(), batch, channels, plane, nullptr, sum.data(), sumsq.data());
    gpu().channel_moments(dxg.data(), batch, channels, plane, nullptr, dsum.data(), dsumsq.data());
    EXPECT_NMSE_LE(download(gpu(), dsum, c), sum, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), dsumsq, c), sumsq, kNmseReduction);
    std::vector<float> mean(c), var(c);
    for (size_t i = 0; i < c; ++i) mean[i] = sum[i] / float(batch * plane);
    auto dmean = upload(gpu(), mean);
    cpu().channel_moments(x.data(), batch, channels, plane, mean.data(), nullptr, var.data());
    gpu().channel_moments(dxg.data(), batch, channels, plane, dmean.data(), nullptr, dsumsq.data());
    EXPECT_NMSE_LE(download(gpu(), dsumsq, c), var, kNmseReduction);
    EXPECT_CANARY(gpu(), dsum, c);
    EXPECT_CANARY(gpu(), dsumsq, c);
    for (float& v : var) v /= float(batch * plane);
    auto dvar = upload(gpu(), var);

    auto gamma = random_floats(c, 112, 0.5f, 1.5f), beta = random_floats(c, 113);
    auto dgamma = upload(gpu(), gamma), dbeta = upload(gpu(), beta);
    std::vector<float> y(n);
    DeviceBuffer<float> dy = guarded<float>(gpu(), n);
    cpu().batchnorm_forward(x.data(), batch, channels, plane, mean.data(), var.data(), eps,
                            gamma.data(), beta.data(), y.data());
    gpu().batchnorm_forward(dxg.data(), batch, channels, plane, dmean.data(), dvar.data(), eps,
                            dgamma.data(), dbeta.data(), dy.data());
    EXPECT_NMSE_LE(download(gpu(), dy, n), y, kNmseElementwise);
    EXPECT_CANARY(gpu(), dy, n);

    std::vector<float> s_dy(c), s_dy_xhat(c);
    DeviceBuffer<float> ds_dy = guarded<float>(gpu(), c), ds_dy_xhat = guarded<float>(gpu(), c);
    cpu().batchnorm_backward_reduce(x.data(), gy.data(), batch, channels, plane, mean.data(),
                                    var.data(), eps, s_dy.data(), s_dy_xhat.data());
    gpu().batchnorm_backward_reduce(dxg.data(), dgy.data(), batch, channels, plane, dmean.data(),
                                    dvar.data(), eps, ds_dy.data(), ds_dy_xhat.data());
    EXPECT_NMSE_LE(download(gpu(), ds_dy, c), s_dy, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), ds_dy_xhat, c), s_dy_xhat, kNmseReduction);
    EXPECT_CANARY(gpu(), ds_dy, c);
    EXPECT_CANARY(gpu(), ds_dy_xhat, c);

    // Backward data from the same (the CPU's) sums on both, then with none (running stats).
    auto us_dy = upload(gpu(), s_dy), us_dy_xhat = upload(gpu(), s_dy_xhat);
    const double count = double(batch * plane);
    for (bool with_sums : {true, false}) {
      SCOPED_TRACE(with_sums ? "batch statistics" : "fixed statistics");
      std::vector<float> dx(n);
      DeviceBuffer<float> ddx = guarded<float>(gpu(), n);
      cpu().batchnorm_backward_data(x.data(), gy.data(), batch, channels, plane, mean.data(),
                                    var.data(), eps, gamma.data(),
                                    with_sums ? s_dy.data() : nullptr,
                                    with_sums ? s_dy_xhat.data() : nullptr, count, dx.data());
      gpu().batchnorm_backward_data(dxg.data(), dgy.data(), batch, channels, plane, dmean.data(),
                                    dvar.data(), eps, dgamma.data(),
                                    with_sums ? us_dy.data() : nullptr,
                                    with_sums ? us_dy_xhat.data() : nullptr, count, ddx.data());
      EXPECT_NMSE_LE(download(gpu(), ddx, n), dx, kNmseElementwise);
      EXPECT_CANARY(gpu(), ddx, n);
    }
  }
}

// A small graph through every new op: a strided, padded, dilated, grouped convolution with
// bias; batch norm; GELU; max and average pooling (ceil mode, padding) joined by an add; a
// 1x1 convolution; SiLU; global average pooling; a dense layer.
constexpr const char* kGraph = R"(
[[layer]]
type = "conv2d"
name = "conv"
out = 8
kernel = 3
stride = 2
padding = 2
dilation = 2
groups = 2

[[layer]]
type = "batchnorm2d"
name = "bn"

[[layer]]
type = "gelu"
name = "gelu"

[[layer]]
type = "maxpool2d"
name = "max"
kernel = 3
stride = 2
padding = 1
ceil_mode = true

[[layer]]
type = "avgpool2d"
name = "avg"
input = "gelu"
kernel = 3
stride = 2
padding = 1
ceil_mode = true
count_include_pad = false

[[layer]]
type = "add"
name = "sum"
inputs = ["max", "avg"]

[[layer]]
type = "conv2d"
name = "mix"
out = 12
kernel = 1
bias = false

[[layer]]
type = "batchnorm2d"
name = "mix_bn"

[[layer]]
type = "silu"
name = "silu"

[[layer]]
type = "globalavgpool2d"
name = "gap"

[[layer]]
type = "linear"
name = "fc"
out = 10
)";

struct GraphStep {
  double loss = 0;
  int64_t correct = 0;
  std::vector<float> grads;
};

GraphStep graph_step(Backend& be) {
  const Config cfg = Config::from_string(kGraph, "cuda_layer_ops_test.toml");
  const nn::Shape input{2, 12, 12};
  auto model = nn::build_model(plan::read_model_spec(cfg), be, input, 10);
  model->init_params(321);
  const int64_t batch = 8;
  auto x = random_floats(size_t(batch * 2 * 12 * 12), 130);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = int32_t((i * 3) % 10);
  auto dx = upload(be, x);
  auto dl = upload(be, labels);
  model->forward(dx.data(), batch, nn::StepInfo{true, 0, 0});
  const auto loss = model->loss(dl.data(), 1.0f / float(batch));
  model->backward();
  GraphStep r;
  r.loss = loss.loss_sum;
  r.correct = loss.correct;
  r.grads.resize(size_t(model->num_params()));
  be.copy_to_host(r.grads.data(), model->grads(), r.grads.size() * sizeof(float));
  return r;
}

TEST(CudaModel, CnnGraphTrainingStepMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const GraphStep on_cpu = graph_step(cpu_backend());
  const GraphStep on_gpu = graph_step(gpu());
  ASSERT_EQ(on_gpu.grads.size(), on_cpu.grads.size());
  EXPECT_NEAR(on_gpu.loss, on_cpu.loss, 1e-4 * on_cpu.loss);
  EXPECT_EQ(on_gpu.correct, on_cpu.correct);
  EXPECT_NMSE_LE(on_gpu.grads, on_cpu.grads, kNmseModel);
}

}  // namespace
}  // namespace loom::test
