// Every Backend op on the CUDA backend against the CPU backend (tensor/cpu/cpu_backend.cc), with
// the same inputs: bit-exact where the op is exact (copies, ReLU, dropout masks, pooling, im2col),
// within a named normalised-MSE budget elsewhere (gpu_compare.h). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

TEST(CudaOps, AllocateIsZeroedAndCopiesRoundTrip) {
  LOOM_REQUIRE_GPU();
  DeviceBuffer<float> z(gpu(), 1001);
  EXPECT_BITS_EQ(download(gpu(), z), std::vector<float>(1001, 0.0f));
  auto host = random_floats(1001, 1);
  auto d = upload(gpu(), host);
  DeviceBuffer<float> e(gpu(), 1001);
  gpu().copy(e.data(), d.data(), 1001 * sizeof(float));
  EXPECT_BITS_EQ(download(gpu(), e), host);
  gpu().fill(e.data(), 1001, 2.5f);
  EXPECT_BITS_EQ(download(gpu(), e), std::vector<float>(1001, 2.5f));
}

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k, pad;  // pad: extra leading-dimension columns, so ld > minimal is exercised
};

TEST(CudaOps, GemmAllTransposesOddSizes) {
  LOOM_REQUIRE_GPU();
  for (GemmCase g : {GemmCase{false, false, 37, 53, 71, 0}, GemmCase{false, true, 37, 53, 71, 3},
                     GemmCase{true, false, 37, 53, 71, 5}, GemmCase{true, true, 37, 53, 71, 1},
                     GemmCase{false, true, 256, 512, 384, 0}, GemmCase{true, false, 1, 1, 1, 0}}) {
    SCOPED_TRACE(testing::Message() << "ta " << g.ta << " tb " << g.tb << " m " << g.m << " n "
                                    << g.n << " k " << g.k);
    // op(A) is [m, k]: stored [m, k] or, transposed, [k, m]; likewise B.
    const int64_t a_rows = g.ta ? g.k : g.m, a_cols = (g.ta ? g.m : g.k) + g.pad;
    const int64_t b_rows = g.tb ? g.n : g.k, b_cols = (g.tb ? g.k : g.n) + g.pad;
    const int64_t ldc = g.n + g.pad;
    auto a = random_floats(size_t(a_rows * a_cols), 2);
    auto b = random_floats(size_t(b_rows * b_cols), 3);
    auto c = random_floats(size_t(g.m * ldc), 4);
    auto da = upload(gpu(), a), db = upload(gpu(), b), dc = upload(gpu(), c);
    cpu().gemm(g.ta, g.tb, g.m, g.n, g.k, 1.5f, a.data(), a_cols, b.data(), b_cols, 0.5f, c.data(),
               ldc);
    gpu().gemm(g.ta, g.tb, g.m, g.n, g.k, 1.5f, da.data(), a_cols, db.data(), b_cols, 0.5f,
               dc.data(), ldc);
    EXPECT_NMSE_LE(download(gpu(), dc), c, kNmseGemm);
  }
}

TEST(CudaOps, BiasAndRowSums) {
  LOOM_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1000, 77}, {1, 5}, {33, 1}, {1024, 1024}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    auto y = random_floats(size_t(rows * cols), 5), bias = random_floats(size_t(cols), 6);
    auto dy = upload(gpu(), y), dbias = upload(gpu(), bias);
    cpu().add_bias(y.data(), bias.data(), rows, cols);
    gpu().add_bias(dy.data(), dbias.data(), rows, cols);
    EXPECT_BITS_EQ(download(gpu(), dy), y);  // one addition per element: exact

    std::vector<float> sums(size_t(cols), 7.0f);  // overwritten, not accumulated
    DeviceBuffer<float> dsums(gpu(), cols);
    gpu().fill(dsums.data(), cols, 7.0f);
    cpu().sum_rows(y.data(), sums.data(), rows, cols);
    gpu().sum_rows(dy.data(), dsums.data(), rows, cols);
    EXPECT_NMSE_LE(download(gpu(), dsums), sums, kNmseReduction);
  }
}

TEST(CudaOps, ChannelBiasAndChannelSumsAccumulate) {
  LOOM_REQUIRE_GPU();
  const int64_t channels = 13, plane = 28 * 28;
  auto y = random_floats(size_t(channels * plane), 7), bias = random_floats(size_t(channels), 8);
  auto dy = upload(gpu(), y), dbias = upload(gpu(), bias);
  cpu().add_channel_bias(y.data(), bias.data(), channels, plane);
  gpu().add_channel_bias(dy.data(), dbias.data(), channels, plane);
  EXPECT_BITS_EQ(download(gpu(), dy), y);

  auto acc = random_floats(size_t(channels), 9);  // accumulated into, twice
  auto dacc = upload(gpu(), acc);
  for (int rep = 0; rep < 2; ++rep) {
    cpu().accumulate_channel_sums(y.data(), acc.data(), channels, plane);
    gpu().accumulate_channel_sums(dy.data(), dacc.data(), channels, plane);
  }
  EXPECT_NMSE_LE(download(gpu(), dacc), acc, kNmseReduction);
}

TEST(CudaOps, AxpyAndScale) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 100003;
  auto x = random_floats(size_t(n), 10), y = random_floats(size_t(n), 11);
  auto dx = upload(gpu(), x), dy = upload(gpu(), y);
  cpu().axpy(n, -0.75f, x.data(), y.data());
  gpu().axpy(n, -0.75f, dx.data(), dy.data());
  EXPECT_NMSE_LE(download(gpu(), dy), y, kNmseElementwise);
  cpu().scale(n, 3.0f, y.data());
  gpu().scale(n, 3.0f, dy.data());
  EXPECT_NMSE_LE(download(gpu(), dy), y, kNmseElementwise);
}

TEST(CudaOps, ReluIsBitExact) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 70001;
  auto x = random_floats(size_t(n), 12);
  x[0] = 0.0f;
  x[1] = -0.0f;
  auto g = random_floats(size_t(n), 13);
  std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  auto dxg = upload(gpu(), x), dg = upload(gpu(), g);
  DeviceBuffer<float> dy(gpu(), n), ddx(gpu(), n);
  cpu().relu_forward(x.data(), y.data(), n);
  gpu().relu_forward(dxg.data(), dy.data(), n);
  EXPECT_BITS_EQ(download(gpu(), dy), y);
  cpu().relu_backward(y.data(), g.data(), dx.data(), n);
  gpu().relu_backward(dy.data(), dg.data(), ddx.data(), n);
  EXPECT_BITS_EQ(download(gpu(), ddx), dx);
}

TEST(CudaOps, DropoutMasksAreBitExact) {
  LOOM_REQUIRE_GPU();
  const uint64_t key = derive_key(42, 0, RngPurpose::kDropout, 7);
  // Offsets that start mid-block, and one past 2^34 so the counter's high word is used.
  for (uint64_t first : {uint64_t(0), uint64_t(3), uint64_t(1) << 34 | 5}) {
    for (int64_t n : {int64_t(1), int64_t(6), int64_t(100001)}) {
      SCOPED_TRACE(testing::Message() << "first " << first << " n " << n);
      auto x = random_floats(size_t(n), 14), g = random_floats(size_t(n), 15);
      std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
      std::vector<uint8_t> mask(static_cast<size_t>(n));
      auto dxg = upload(gpu(), x), dg = upload(gpu(), g);
      DeviceBuffer<float> dy(gpu(), n), ddx(gpu(), n);
      DeviceBuffer<uint8_t> dmask(gpu(), n);
      cpu().dropout_forward(x.data(), y.data(), mask.data(), n, 0.3f, key, first);
      gpu().dropout_forward(dxg.data(), dy.data(), dmask.data(), n, 0.3f, key, first);
      EXPECT_BITS_EQ(download(gpu(), dmask), mask);
      EXPECT_BITS_EQ(download(gpu(), dy), y);
      cpu().dropout_backward(g.data(), mask.data(), dx.data(), n, 0.3f);
      gpu().dropout_backward(dg.data(), dmask.data(), ddx.data(), n, 0.3f);
      EXPECT_BITS_EQ(download(gpu(), ddx), dx);
    }
  }
}

TEST(CudaOps, DropoutMaskMatchesPhiloxUniformDirectly) {
  LOOM_REQUIRE_GPU();
  // Independent of the CPU backend's loop: the documented rule, element by element.
  const int64_t n = 4099;
  const uint64_t key = 0x0123456789abcdefull, first = 17;
  auto x = random_floats(size_t(n), 16);
  auto dxg = upload(gpu(), x);
  DeviceBuffer<float> dy(gpu(), n);
  DeviceBuffer<uint8_t> dmask(gpu(), n);
  gpu().dropout_forward(dxg.data(), dy.data(), dmask.data(), n, 0.5f, key, first);
  auto mask = download(gpu(), dmask);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(mask[size_t(i)], uint8_t(philox_uniform(key, first + uint64_t(i)) >= 0.5f)) << i;
    kept += mask[size_t(i)];
  }
  EXPECT_NEAR(double(kept) / n, 0.5, 0.05);
}

TEST(CudaOps, SoftmaxXentMatchesCpu) {
  LOOM_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1024, 10}, {7, 1000}, {3, 1}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    auto z = random_floats(size_t(rows * cols), 17, -8.0f, 8.0f);
    // A tied row: the argmax is the first maximal column on both.
    for (int64_t c = 0; c < cols; ++c) z[size_t(c)] = 1.0f;
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    Rng rng(18, 0, RngPurpose::kTest);
    for (auto& l : labels) l = int32_t(rng.below(uint64_t(cols)));
    labels[0] = 0;
    auto dz = upload(gpu(), z);
    auto dl = upload(gpu(), labels);
    std::vector<float> grad(z.size());
    DeviceBuffer<float> dgrad(gpu(), int64_t(z.size()));
    int64_t right_cpu = -1, right_gpu = -1;
    const double loss_cpu =
        cpu().softmax_xent(z.data(), labels.data(), rows, cols, 0.25f, grad.data(), &right_cpu);
    const double loss_gpu =
        gpu().softmax_xent(dz.data(), dl.data(), rows, cols, 0.25f, dgrad.data(), &right_gpu);
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-9 * std::abs(loss_cpu));
    EXPECT_EQ(right_gpu, right_cpu);
    EXPECT_NMSE_LE(download(gpu(), dgrad), grad, kNmseSoftmax);
    EXPECT_EQ(gpu().count_correct(dz.data(), dl.data(), rows, cols),
              cpu().count_correct(z.data(), labels.data(), rows, cols));
  }
}

TEST(CudaOps, MseMatchesCpu) {
  LOOM_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1024, 1}, {7, 300}, {64, 10}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    auto y = random_floats(size_t(rows * cols), 41, -4.0f, 4.0f);
    auto t = random_floats(size_t(rows * cols), 42, -4.0f, 4.0f);
    auto dy = upload(gpu(), y);
    auto dt = upload(gpu(), t);
    std::vector<float> grad(y.size());
    DeviceBuffer<float> dgrad(gpu(), int64_t(y.size()));
    const double loss_cpu = cpu().mse(y.data(), t.data(), rows, cols, 0.5f, grad.data());
    const double loss_gpu = gpu().mse(dy.data(), dt.data(), rows, cols, 0.5f, dgrad.data());
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-9 * std::abs(loss_cpu));
    // The same float arithmetic per element: the gradients are the same bits.
    EXPECT_BITS_EQ(download(gpu(), dgrad), grad);
  }
}

TEST(CudaOps, SoftmaxXentRejectsLabelOutOfRangeLikeCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t rows = 5, cols = 10;
  auto z = random_floats(static_cast<size_t>(rows * cols), 31);
  std::vector<int32_t> labels = {1, 2, 10, 3, 4};
  auto dz = upload(gpu(), z);
  auto dl = upload(gpu(), labels);
  DeviceBuffer<float> dgrad(gpu(), rows * cols);
  std::vector<float> grad(z.size());
  EXPECT_THROW(cpu().softmax_xent(z.data(), labels.data(), rows, cols, 1.0f, grad.data(), nullptr),
               InputError);
  try {
    gpu().softmax_xent(dz.data(), dl.data(), rows, cols, 1.0f, dgrad.data(), nullptr);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("label 10 of row 2"), std::string::npos) << e.what();
  }
}

TEST(CudaOps, DropoutOfNegativeValuesKeepsTheCpuSignOfZero) {
  LOOM_REQUIRE_GPU();
  // Dropped elements are x * 0: -0.0 for negative x, on both backends.
  const int64_t n = 4096;
  std::vector<float> x(static_cast<size_t>(n), -1.5f), y(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  auto dxg = upload(gpu(), x);
  DeviceBuffer<float> dy(gpu(), n);
  DeviceBuffer<uint8_t> dmask(gpu(), n);
  cpu().dropout_forward(x.data(), y.data(), mask.data(), n, 0.5f, 99, 0);
  gpu().dropout_forward(dxg.data(), dy.data(), dmask.data(), n, 0.5f, 99, 0);
  EXPECT_BITS_EQ(download(gpu(), dy), y);
}

TEST(CudaOps, Im2colAndCol2imAreBitExact) {
  LOOM_REQUIRE_GPU();
  struct Case {
    int64_t c, h, w, k, pad, stride;
  };
  for (Case cs : {Case{3, 28, 28, 5, 2, 1}, Case{2, 9, 7, 3, 1, 2}, Case{1, 5, 5, 5, 0, 1}}) {
    SCOPED_TRACE(testing::Message() << "c " << cs.c << " h " << cs.h << " w " << cs.w << " k "
                                    << cs.k << " pad " << cs.pad << " stride " << cs.stride);
    const int64_t oh = (cs.h + 2 * cs.pad - cs.k) / cs.stride + 1;
    const int64_t ow = (cs.w + 2 * cs.pad - cs.k) / cs.stride + 1;
    const int64_t ncol = cs.c * cs.k * cs.k * oh * ow, nimg = cs.c * cs.h * cs.w;
    auto img = random_floats(size_t(nimg), 19);
    std::vector<float> cols(static_cast<size_t>(ncol));
    auto dimg = upload(gpu(), img);
    DeviceBuffer<float> dcols(gpu(), ncol);
    cpu().im2col(img.data(), cs.c, cs.h, cs.w, cs.k, cs.pad, cs.stride, cols.data());
    gpu().im2col(dimg.data(), cs.c, cs.h, cs.w, cs.k, cs.pad, cs.stride, dcols.data());
    EXPECT_BITS_EQ(download(gpu(), dcols), cols);

    auto g = random_floats(size_t(ncol), 20);
    auto dg = upload(gpu(), g);
    std::vector<float> back(static_cast<size_t>(nimg));
    cpu().col2im(g.data(), cs.c, cs.h, cs.w, cs.k, cs.pad, cs.stride, back.data());
    gpu().col2im(dg.data(), cs.c, cs.h, cs.w, cs.k, cs.pad, cs.stride, dimg.data());
    EXPECT_BITS_EQ(download(gpu(), dimg), back);
  }
}

TEST(CudaOps, MaxpoolArgmaxIsBitExact) {
  LOOM_REQUIRE_GPU();
  const int64_t planes = 6, h = 29, w = 27, size = 2;  // odd sizes: trailing rows/cols dropped
  auto x = random_floats(size_t(planes * h * w), 21);
  x[0] = x[1] = x[size_t(w)] = x[size_t(w) + 1] = 3.0f;  // a tied window: first one wins
  const int64_t out = planes * (h / size) * (w / size);
  std::vector<float> y(static_cast<size_t>(out));
  std::vector<int32_t> arg(static_cast<size_t>(out));
  auto dx = upload(gpu(), x);
  DeviceBuffer<float> dy(gpu(), out);
  DeviceBuffer<int32_t> darg(gpu(), out);
  cpu().maxpool_forward(x.data(), y.data(), arg.data(), planes, h, w, size);
  gpu().maxpool_forward(dx.data(), dy.data(), darg.data(), planes, h, w, size);
  EXPECT_BITS_EQ(download(gpu(), dy), y);
  EXPECT_BITS_EQ(download(gpu(), darg), arg);

  auto g = random_floats(size_t(out), 22);
  auto dg = upload(gpu(), g);
  std::vector<float> back(x.size());
  cpu().maxpool_backward(g.data(), arg.data(), back.data(), planes, h, w, size);
  gpu().maxpool_backward(dg.data(), darg.data(), dx.data(), planes, h, w, size);
  EXPECT_BITS_EQ(download(gpu(), dx), back);
}

TEST(CudaOps, SgdVariantsMatchCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 50001;
  struct Case {
    float momentum, wd;
    bool nesterov;
  };
  for (Case cs : {Case{0.0f, 1e-4f, false}, Case{0.9f, 5e-4f, false}, Case{0.9f, 0.0f, true}}) {
    SCOPED_TRACE(testing::Message() << "momentum " << cs.momentum << " nesterov " << cs.nesterov);
    auto p = random_floats(size_t(n), 23), g = random_floats(size_t(n), 24),
         v = random_floats(size_t(n), 25);
    auto dp = upload(gpu(), p), dg = upload(gpu(), g), dv = upload(gpu(), v);
    for (int step = 0; step < 3; ++step) {
      cpu().sgd_update(p.data(), g.data(), v.data(), n, 0.05f, cs.momentum, cs.wd, cs.nesterov);
      gpu().sgd_update(dp.data(), dg.data(), dv.data(), n, 0.05f, cs.momentum, cs.wd, cs.nesterov);
    }
    EXPECT_NMSE_LE(download(gpu(), dp), p, kNmseElementwise);
    if (cs.momentum != 0.0f) EXPECT_NMSE_LE(download(gpu(), dv), v, kNmseElementwise);
  }
}

TEST(CudaOps, AdamAndAdamWMatchCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 50001;
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(testing::Message() << "decoupled " << decoupled);
    auto p = random_floats(size_t(n), 26), g = random_floats(size_t(n), 27);
    std::vector<float> m(size_t(n), 0.0f), v(size_t(n), 0.0f);
    auto dp = upload(gpu(), p), dg = upload(gpu(), g), dm = upload(gpu(), m), dv = upload(gpu(), v);
    for (int64_t t = 1; t <= 3; ++t) {
      cpu().adam_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                        0.01f, decoupled, t);
      gpu().adam_update(dp.data(), dg.data(), dm.data(), dv.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                        0.01f, decoupled, t);
    }
    EXPECT_NMSE_LE(download(gpu(), dp), p, kNmseElementwise);
    EXPECT_NMSE_LE(download(gpu(), dm), m, kNmseElementwise);
    EXPECT_NMSE_LE(download(gpu(), dv), v, kNmseElementwise);
  }
}

TEST(CudaOps, HasNonFiniteFindsNanAndInf) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 100000;
  auto x = random_floats(size_t(n), 28, -1e30f, 1e30f);
  auto dx = upload(gpu(), x);
  EXPECT_FALSE(gpu().has_non_finite(dx.data(), n));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    x[size_t(n - 1)] = bad;
    gpu().copy_to_device(dx.data(), x.data(), x.size() * sizeof(float));
    EXPECT_TRUE(gpu().has_non_finite(dx.data(), n)) << bad;
    EXPECT_EQ(gpu().has_non_finite(dx.data(), n), cpu().has_non_finite(x.data(), n));
  }
  EXPECT_FALSE(gpu().has_non_finite(dx.data(), n - 1));
}

}  // namespace
}  // namespace loom::test
