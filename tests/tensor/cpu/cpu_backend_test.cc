// Every CpuBackend op against a plain hand-written expectation: bias and sums, ReLU, dropout,
// softmax cross-entropy, im2col/col2im, max pooling, non-finite detection. The optimizer
// updates are in cpu_backend_update_test.cc.
#include "loom/tensor/cpu/cpu_backend.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "loom/core/rng.h"
#include "loom/tensor/buffer.h"
#include "tensor/random_vector.h"

namespace loom {
namespace {

using loom::testing::random_vector;

TEST(CpuBackend, AllocateIsZeroedAndAligned) {
  CpuBackend be;
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(1000)}) {
    auto* p = static_cast<unsigned char*>(be.allocate(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << bytes << " byte " << i;
    be.deallocate(p);
  }
  DeviceBuffer<float> a(be, 10);
  EXPECT_EQ(a.size(), 10);
  float* raw = a.data();
  DeviceBuffer<float> b = std::move(a);
  EXPECT_EQ(b.data(), raw);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0);
}

TEST(CpuBackend, CopyFillAxpyScale) {
  CpuBackend be;
  std::vector<float> x = {1, 2, 3, 4, 5}, y = {10, 20, 30, 40, 50}, z(5);
  be.copy(z.data(), x.data(), 5 * sizeof(float));
  EXPECT_EQ(z, x);
  be.axpy(5, -2.0f, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{8, 16, 24, 32, 40}));
  be.scale(5, 0.5f, y.data());
  EXPECT_EQ(y, (std::vector<float>{4, 8, 12, 16, 20}));
  be.fill(z.data(), 4, 7.0f);
  EXPECT_EQ(z, (std::vector<float>{7, 7, 7, 7, 5}));  // only n elements
}

TEST(CpuBackend, HostCopiesAndName) {
  CpuBackend be;
  const std::vector<float> host = {1.5f, -2, 3};
  DeviceBuffer<float> dev(be, 3);
  be.copy_to_device(dev.data(), host.data(), 3 * sizeof(float));
  std::vector<float> back(3);
  be.copy_to_host(back.data(), dev.data(), 3 * sizeof(float));
  EXPECT_EQ(back, host);
  // copy may overlap (memmove semantics)
  std::vector<float> v = {1, 2, 3, 4, 5};
  be.copy(v.data() + 1, v.data(), 4 * sizeof(float));
  EXPECT_EQ(v, (std::vector<float>{1, 1, 2, 3, 4}));
  EXPECT_EQ(be.device(), Device::kCpu);
  EXPECT_EQ(be.name().rfind("cpu (", 0), 0u) << be.name();
}

// Intra-op threads are a per-thread setting: a worker thread that sets its own count does not
// change the caller's.
TEST(CpuBackend, IntraOpThreadsArePerThread) {
  CpuBackend be;
  be.set_intra_op_threads(2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  int inside = -1;
  std::thread worker([&] {
    be.set_intra_op_threads(1);
    inside = omp_get_max_threads();
  });
  worker.join();
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(omp_get_max_threads(), 2);
  be.set_intra_op_threads(0);  // clamped to 1
  EXPECT_EQ(omp_get_max_threads(), 1);
}

TEST(CpuBackend, AddBiasAndSumRows) {
  CpuBackend be;
  const int64_t rows = 3, cols = 5;
  std::vector<float> y = random_vector(rows * cols, 1), bias = random_vector(cols, 2);
  std::vector<float> want = y;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[size_t(r * cols + c)] += bias[size_t(c)];
  be.add_bias(y.data(), bias.data(), rows, cols);
  EXPECT_EQ(y, want);

  std::vector<float> dy = {1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500};
  std::vector<float> db(cols, 99.0f);  // overwritten, not accumulated
  be.sum_rows(dy.data(), db.data(), rows, cols);
  EXPECT_EQ(db, (std::vector<float>{111, 222, 333, 444, 555}));
}

TEST(CpuBackend, ChannelBiasAndAccumulatedChannelSums) {
  CpuBackend be;
  // Two channels of a 2x3 plane.
  std::vector<float> y = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const float bias[] = {100, -1};
  be.add_channel_bias(y.data(), bias, 2, 6);
  EXPECT_EQ(y, (std::vector<float>{100, 101, 102, 103, 104, 105, 5, 6, 7, 8, 9, 10}));

  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  std::vector<float> db = {1000, 2000};  // accumulates
  be.accumulate_channel_sums(dy.data(), db.data(), 2, 6);
  EXPECT_EQ(db, (std::vector<float>{1021, 1979}));
  be.accumulate_channel_sums(dy.data(), db.data(), 2, 6);
  EXPECT_EQ(db, (std::vector<float>{1042, 1958}));
}

TEST(CpuBackend, ReluForwardBackward) {
  CpuBackend be;
  const std::vector<float> x = {-2, -0.0f, 0, 1e-30f, 3, -1e-30f, 5, -7, 0.5f};
  std::vector<float> y(x.size());
  be.relu_forward(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> dx(x.size(), -99.0f);
  be.relu_backward(y.data(), dy.data(), dx.data(), int64_t(x.size()));
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 0, 4, 5, 0, 7, 0, 9}));
}

TEST(CpuBackend, DropoutMaskFollowsPhiloxStreamAndKeepRate) {
  CpuBackend be;
  const int64_t n = 1 << 20;
  const float p = 0.3f;
  const uint64_t key = derive_key(42, 0, RngPurpose::kDropout, 7);
  const uint64_t first = 11;  // not a multiple of 4: the first Philox block is partly used
  std::vector<float> x = random_vector(n, 3, 0.5f, 1.5f), y(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  be.dropout_forward(x.data(), y.data(), mask.data(), n, p, key, first);
  const float scale = 1.0f / (1.0f - p);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool want_keep = philox_uniform(key, first + uint64_t(i)) >= p;
    ASSERT_EQ(bool(mask[size_t(i)]), want_keep) << i;
    ASSERT_EQ(y[size_t(i)], want_keep ? x[size_t(i)] * scale : 0.0f) << i;
    kept += want_keep;
  }
  // Binomial(n, 0.7): standard deviation sqrt(0.21 / n) = 4.5e-4 of the rate.
  EXPECT_NEAR(double(kept) / double(n), 1.0 - p, 0.003);

  // Same key and index: same mask, bitwise.
  std::vector<float> y2(static_cast<size_t>(n));
  std::vector<uint8_t> mask2(static_cast<size_t>(n));
  be.dropout_forward(x.data(), y2.data(), mask2.data(), n, p, key, first);
  EXPECT_EQ(mask2, mask);
  EXPECT_EQ(y2, y);
  // Another key: a different mask.
  be.dropout_forward(x.data(), y2.data(), mask2.data(), n, p, key + 1, first);
  EXPECT_NE(mask2, mask);
}

TEST(CpuBackend, DropoutSliceAloneEqualsSliceOfWhole) {
  CpuBackend be;
  const int64_t n = 4099;
  const float p = 0.5f;
  const uint64_t key = 0x1234567890abcdefull;
  std::vector<float> x = random_vector(n, 4), y(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  be.dropout_forward(x.data(), y.data(), mask.data(), n, p, key, 0);
  const std::pair<int64_t, int64_t> slices[] = {{0, 1}, {1, 2},       {3, 9},       {5, 1003},
                                                {4, 8}, {1000, 4099}, {4098, 4099}, {2, 4097}};
  for (auto [a, b] : slices) {
    SCOPED_TRACE(::testing::Message() << "[" << a << ", " << b << ")");
    const int64_t len = b - a;
    std::vector<float> ys(static_cast<size_t>(len));
    std::vector<uint8_t> ms(static_cast<size_t>(len));
    be.dropout_forward(x.data() + a, ys.data(), ms.data(), len, p, key, uint64_t(a));
    EXPECT_EQ(ms, std::vector<uint8_t>(mask.begin() + a, mask.begin() + b));
    EXPECT_EQ(ys, std::vector<float>(y.begin() + a, y.begin() + b));
  }
  // Indices past 2^34 use the counter's second word.
  const uint64_t far = (uint64_t(1) << 36) + 3;
  std::vector<uint8_t> ms(64);
  std::vector<float> ys(64);
  be.dropout_forward(x.data(), ys.data(), ms.data(), 64, p, key, far);
  for (uint64_t i = 0; i < 64; ++i) EXPECT_EQ(bool(ms[i]), philox_uniform(key, far + i) >= p) << i;
  EXPECT_NE(ms, std::vector<uint8_t>(mask.begin(), mask.begin() + 64));
}

TEST(CpuBackend, DropoutBackwardAndZeroRate) {
  CpuBackend be;
  const std::vector<uint8_t> mask = {1, 0, 0, 1, 1};
  const std::vector<float> dy = {1, 2, 3, 4, 5};
  std::vector<float> dx(5, -1.0f);
  be.dropout_backward(dy.data(), mask.data(), dx.data(), 5, 0.75f);
  EXPECT_EQ(dx, (std::vector<float>{4, 0, 0, 16, 20}));

  // p = 0 keeps everything, unscaled.
  std::vector<float> x = random_vector(100, 5), y(100);
  std::vector<uint8_t> m(100);
  be.dropout_forward(x.data(), y.data(), m.data(), 100, 0.0f, 9, 0);
  EXPECT_EQ(y, x);
  EXPECT_EQ(m, std::vector<uint8_t>(100, 1));
}

// Softmax cross-entropy in double: loss_r = log sum_c exp(z_c) - z_label.
TEST(CpuBackend, SoftmaxXentMatchesDoubleFormula) {
  CpuBackend be;
  const int64_t rows = 7, cols = 10;
  std::vector<float> z = random_vector(rows * cols, 6, -4.0f, 4.0f);
  for (int64_t c = 0; c < cols; ++c) z[size_t(cols + c)] += 80.0f;  // row 1: large, still stable
  for (int64_t c = 0; c < cols; ++c) z[size_t(2 * cols + c)] -= 90.0f;
  const std::vector<int32_t> labels = {0, 9, 3, 3, 5, 1, 8};
  const float scale = 1.0f / float(rows);
  std::vector<float> dz(size_t(rows * cols), 99.0f);
  int64_t correct = -1;
  const double loss =
      be.softmax_xent(z.data(), labels.data(), rows, cols, scale, dz.data(), &correct, 0.0f);

  double want_loss = 0;
  int64_t want_correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* zr = z.data() + r * cols;
    double mx = zr[0];
    int64_t arg = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (zr[c] > mx) mx = zr[c], arg = c;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(zr[c]) - mx);
    want_loss += mx + std::log(sum) - double(zr[labels[size_t(r)]]);
    want_correct += arg == labels[size_t(r)];
    for (int64_t c = 0; c < cols; ++c) {
      const double g = (std::exp(double(zr[c]) - mx) / sum - (c == labels[size_t(r)])) * scale;
      EXPECT_NEAR(dz[size_t(r * cols + c)], g, 1e-7) << r << ", " << c;
    }
  }
  EXPECT_NEAR(loss, want_loss, 1e-5 * want_loss);
  EXPECT_EQ(correct, want_correct);
  EXPECT_EQ(be.count_correct(z.data(), labels.data(), rows, cols), want_correct);
  // Null `correct` is allowed.
  EXPECT_NO_THROW(
      be.softmax_xent(z.data(), labels.data(), rows, cols, scale, dz.data(), nullptr, 0.0f));
}

TEST(CpuBackend, SoftmaxXentKnownValuesAndCorrectCount) {
  CpuBackend be;
  // Uniform logits over 4 classes: loss log 4 per row, gradient 1/4 - onehot.
  // Row 1 has its argmax (class 2) at the label; row 2 has it elsewhere.
  const std::vector<float> z = {0, 0, 0, 0, 1, 2, 5, 3, 9, 1, 1, 1};
  const std::vector<int32_t> labels = {1, 2, 3};
  std::vector<float> dz(12);
  int64_t correct = -1;
  const double loss =
      be.softmax_xent(z.data(), labels.data(), 3, 4, 1.0f, dz.data(), &correct, 0.0f);
  EXPECT_FLOAT_EQ(dz[0], 0.25f);
  EXPECT_FLOAT_EQ(dz[1], -0.75f);
  // Row 0 is all ties: the first maximum (class 0) wins, so only row 1 counts.
  EXPECT_EQ(correct, 1);
  EXPECT_EQ(be.count_correct(z.data(), labels.data(), 3, 4), 1);
  const double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(5.0) + std::exp(3.0)) - 5.0;
  const double row2 = std::log(std::exp(9.0) + 3 * std::exp(1.0)) - 1.0;
  EXPECT_NEAR(loss, std::log(4.0) + row1 + row2, 1e-6);
  // Each row of the gradient sums to zero.
  for (int r = 0; r < 3; ++r)
    EXPECT_NEAR(
        dz[size_t(4 * r)] + dz[size_t(4 * r + 1)] + dz[size_t(4 * r + 2)] + dz[size_t(4 * r + 3)],
        0.0, 1e-6);
}

TEST(CpuBackend, Im2colHandComputed) {
  CpuBackend be;
  // One 3x3 channel, kernel 2, no pad, stride 1: 4 output positions, 4 kernel taps.
  const std::vector<float> img = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> cols(16);
  be.im2col(img.data(), 1, 3, 3, 2, 0, 1, cols.data());
  // Row (ky, kx) lists the pixel under that tap for outputs (0,0), (0,1), (1,0), (1,1).
  EXPECT_EQ(cols, (std::vector<float>{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}));

  // Pad 1, stride 2, kernel 3 on the same image: outputs (0,0), (0,1), (1,0), (1,1) are
  // centred on pixels (0,0), (0,2), (2,0), (2,2); taps outside the image read 0.
  std::vector<float> cols2(36, -1.0f);
  be.im2col(img.data(), 1, 3, 3, 3, 1, 2, cols2.data());
  // Tap (0,0) sits at centre + (-1,-1).
  EXPECT_EQ(std::vector<float>(cols2.begin(), cols2.begin() + 4), (std::vector<float>{0, 0, 0, 5}));
  // Tap (1,1) is the centre itself.
  EXPECT_EQ(std::vector<float>(cols2.begin() + 16, cols2.begin() + 20),
            (std::vector<float>{1, 3, 7, 9}));
  // Tap (2,2) sits at centre + (1,1).
  EXPECT_EQ(std::vector<float>(cols2.begin() + 32, cols2.begin() + 36),
            (std::vector<float>{5, 0, 0, 0}));

  // col2im of all ones counts how many windows cover each pixel.
  std::vector<float> ones(16, 1.0f), counts(9, -5.0f);
  be.col2im(ones.data(), 1, 3, 3, 2, 0, 1, counts.data());
  EXPECT_EQ(counts, (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

// <im2col(x), c> == <x, col2im(c)>: col2im is the adjoint of im2col.
TEST(CpuBackend, Col2imIsAdjointOfIm2col) {
  CpuBackend be;
  struct Case {
    int64_t c, h, w, k, pad, stride;
  };
  const Case cases[] = {{1, 5, 5, 3, 1, 1}, {2, 6, 7, 3, 1, 2}, {3, 7, 5, 5, 2, 1},
                        {2, 8, 8, 2, 0, 2}, {1, 9, 4, 3, 0, 3}, {2, 5, 6, 4, 2, 2},
                        {1, 1, 1, 1, 0, 1}, {3, 4, 4, 5, 2, 3}};
  uint64_t seed = 10;
  for (const Case& t : cases) {
    SCOPED_TRACE(::testing::Message() << "c=" << t.c << " h=" << t.h << " w=" << t.w << " k=" << t.k
                                      << " pad=" << t.pad << " stride=" << t.stride);
    const int64_t oh = (t.h + 2 * t.pad - t.k) / t.stride + 1;
    const int64_t ow = (t.w + 2 * t.pad - t.k) / t.stride + 1;
    const int64_t ncols = t.c * t.k * t.k * oh * ow, nimg = t.c * t.h * t.w;
    std::vector<float> x = random_vector(nimg, seed++), c = random_vector(ncols, seed++);
    std::vector<float> ax(static_cast<size_t>(ncols)), atc(size_t(nimg), 77.0f);
    be.im2col(x.data(), t.c, t.h, t.w, t.k, t.pad, t.stride, ax.data());
    be.col2im(c.data(), t.c, t.h, t.w, t.k, t.pad, t.stride, atc.data());
    double lhs = 0, rhs = 0, scale = 0;
    for (int64_t i = 0; i < ncols; ++i) {
      lhs += double(ax[size_t(i)]) * c[size_t(i)];
      scale += std::fabs(double(ax[size_t(i)]) * c[size_t(i)]);
    }
    for (int64_t i = 0; i < nimg; ++i) rhs += double(x[size_t(i)]) * atc[size_t(i)];
    EXPECT_NEAR(lhs, rhs, 1e-5 * scale + 1e-12);
    EXPECT_GT(scale, 0.0);
  }
}

TEST(CpuBackend, MaxPoolForwardBackward) {
  CpuBackend be;
  // Two planes of 4x5 with a 2x2 window: output 2x2 per plane; column 4 is dropped.
  const std::vector<float> x = {1, 9, 2, 3, 99,      //
                                4, 5, 8, 7, 99,      //
                                -1, -2, 0, 6, 99,    //
                                -3, -4, 11, 10, 99,  //
                                // plane 1
                                5, 4, 3, 2, 1,       //
                                0, 1, 2, 3.25f, 4,   //
                                -5, -9, 7, 7.5f, 0,  //
                                -6, -7, 8, 6, 0};
  std::vector<float> y(8);
  std::vector<int32_t> arg(8, -1);
  be.maxpool_forward(x.data(), y.data(), arg.data(), 2, 4, 5, 2);
  EXPECT_EQ(y, (std::vector<float>{9, 8, -1, 11, 5, 3.25f, -5, 8}));
  // argmax is the index within the plane.
  EXPECT_EQ(arg, (std::vector<int32_t>{1, 7, 10, 17, 0, 8, 10, 17}));

  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> dx(40, -9.0f);
  be.maxpool_backward(dy.data(), arg.data(), dx.data(), 2, 4, 5, 2);
  std::vector<float> want(40, 0.0f);
  const int idx[] = {1, 7, 10, 17, 20, 28, 30, 37};
  for (int i = 0; i < 8; ++i) want[size_t(idx[i])] = dy[size_t(i)];
  EXPECT_EQ(dx, want);
}

TEST(CpuBackend, MaxPoolWindowThree) {
  CpuBackend be;
  std::vector<float> x = random_vector(2 * 6 * 9, 20);
  std::vector<float> y(2 * 2 * 3);
  std::vector<int32_t> arg(12);
  be.maxpool_forward(x.data(), y.data(), arg.data(), 2, 6, 9, 3);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t oy = 0; oy < 2; ++oy)
      for (int64_t ox = 0; ox < 3; ++ox) {
        float best = -1e30f;
        for (int64_t dy = 0; dy < 3; ++dy)
          for (int64_t dx = 0; dx < 3; ++dx)
            best = std::max(best, x[size_t(p * 54 + (oy * 3 + dy) * 9 + ox * 3 + dx)]);
        const size_t o = size_t((p * 2 + oy) * 3 + ox);
        EXPECT_EQ(y[o], best);
        EXPECT_EQ(x[size_t(p * 54 + arg[o])], best);
      }
}

TEST(CpuBackend, HasNonFiniteAtEveryPosition) {
  CpuBackend be;
  const float specials[] = {
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity()};
  for (int64_t n : {1, 7, 8, 9, 16, 17, 31, 64, 1000, 1027}) {
    std::vector<float> x = random_vector(n, uint64_t(n));
    x[0] = std::numeric_limits<float>::max();  // large finite values are finite
    if (n > 1) x[1] = -std::numeric_limits<float>::max();
    if (n > 2) x[2] = std::numeric_limits<float>::denorm_min();
    EXPECT_FALSE(be.has_non_finite(x.data(), n)) << n;
    for (int64_t pos : {int64_t(0), int64_t(1), n / 2, n - 8, n - 2, n - 1}) {
      if (pos < 0 || pos >= n) continue;
      for (float s : specials) {
        std::vector<float> y = x;
        y[size_t(pos)] = s;
        EXPECT_TRUE(be.has_non_finite(y.data(), n)) << "n=" << n << " pos=" << pos << " " << s;
        EXPECT_FALSE(be.has_non_finite(y.data(), pos)) << "prefix before " << pos;
      }
    }
  }
  EXPECT_FALSE(be.has_non_finite(nullptr, 0));
  // note_non_finite sets the flag on a NaN or Inf and never clears it.
  float flag = 0;
  std::vector<float> x = random_vector(100, 7);
  be.note_non_finite(x.data(), 100, &flag);
  EXPECT_EQ(flag, 0.0f);
  x[63] = std::numeric_limits<float>::infinity();
  be.note_non_finite(x.data(), 63, &flag);
  EXPECT_EQ(flag, 0.0f);
  be.note_non_finite(x.data(), 100, &flag);
  EXPECT_EQ(flag, 1.0f);
  x[63] = 1.0f;
  be.note_non_finite(x.data(), 100, &flag);
  EXPECT_EQ(flag, 1.0f);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// The fused BatchNorm passes of a training step give the bits of the separate ones (moments,
// normalise; reduce, data) that a replicated BatchNorm uses, on planes below and above the
// 16 lanes where the fused passes change their loop order.
TEST(CpuBackend, FusedBatchNormMatchesItsSeparatePassesBitForBit) {
  Backend& be = cpu_backend();
  for (int64_t plane : {1, 4, 15, 16, 49}) {
    const int64_t batch = 5, channels = 7, n = batch * channels * plane;
    const size_t cs = size_t{7}, ns = static_cast<size_t>(n);
    const auto x = testing::random_vector(n, 31, -2.0f, 3.0f);
    const auto dy = testing::random_vector(n, 32);
    const auto gamma = testing::random_vector(channels, 33, 0.5f, 1.5f);
    const auto beta = testing::random_vector(channels, 34);
    const float inv_count = 1.0f / float(batch * plane), eps = 1e-5f;
    std::vector<float> mean(cs), var(cs), sumsq(cs);
    std::vector<float> y(ns);
    be.batchnorm_forward_training(x.data(), batch, channels, plane, inv_count, eps, gamma.data(),
                                  beta.data(), mean.data(), var.data(), sumsq.data(), y.data());
    std::vector<float> sums(cs), mean2(cs), sq2(cs), var2(cs), y2(ns);
    be.channel_moments(x.data(), batch, channels, plane, nullptr, sums.data(), nullptr);
    for (int64_t c = 0; c < channels; ++c) mean2[size_t(c)] = sums[size_t(c)] * inv_count;
    be.channel_moments(x.data(), batch, channels, plane, mean2.data(), nullptr, sq2.data());
    for (int64_t c = 0; c < channels; ++c) var2[size_t(c)] = sq2[size_t(c)] * inv_count;
    be.batchnorm_forward(x.data(), batch, channels, plane, mean2.data(), var2.data(), eps,
                         gamma.data(), beta.data(), y2.data());
    EXPECT_EQ(mean, mean2) << "plane " << plane;
    EXPECT_EQ(sumsq, sq2) << "plane " << plane;
    EXPECT_EQ(y, y2) << "plane " << plane;

    const double count = double(batch * plane);
    std::vector<float> s_dy(cs), s_xhat(cs), dx(ns);
    be.batchnorm_backward(x.data(), dy.data(), batch, channels, plane, mean.data(), var.data(), eps,
                          gamma.data(), count, s_dy.data(), s_xhat.data(), dx.data());
    std::vector<float> s_dy2(cs), s_xhat2(cs), dx2(ns);
    be.batchnorm_backward_reduce(x.data(), dy.data(), batch, channels, plane, mean.data(),
                                 var.data(), eps, s_dy2.data(), s_xhat2.data());
    be.batchnorm_backward_data(x.data(), dy.data(), batch, channels, plane, mean.data(), var.data(),
                               eps, gamma.data(), s_dy2.data(), s_xhat2.data(), count, dx2.data());
    EXPECT_EQ(s_dy, s_dy2) << "plane " << plane;
    EXPECT_EQ(s_xhat, s_xhat2) << "plane " << plane;
    EXPECT_EQ(dx, dx2) << "plane " << plane;
  }
}

}  // namespace
}  // namespace loom
