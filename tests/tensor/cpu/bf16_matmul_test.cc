// bf16 matrix products of the CPU backend (oneDNN's bf16 matmul and convolution primitives):
// each equals a double-precision reference computed on the inputs rounded to bf16 (nearest
// even) up to fp32 accumulation-order rounding, and differs from the plain fp32 product by
// bf16's input rounding (relative error of order 2^-8). The precision is a backend setting
// that only gemm and the conv2d ops follow, and a CPU without AVX512_BF16 refuses it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "loom/core/cpu_features.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/tensor/cpu/onednn_conv.h"
#include "loom/tensor/cpu/onednn_matmul.h"
#include "tensor/random_vector.h"

namespace loom {
namespace {

// Round to nearest, ties to even, as the bf16 format (the upper 16 bits of an fp32) defines it.
float round_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}

using loom::testing::random_vector;

#define SKIP_WITHOUT_BF16()                                                              \
  if (!cpu_has_avx512_bf16())                                                            \
  GTEST_SKIP() << "this CPU lacks AVX512_BF16 (avx512_bf16 in /proc/cpuinfo): the bf16 " \
                  "numeric tests need it"

// Sets the CPU backend's precision for one test and puts fp32 back.
struct PrecisionScope {
  explicit PrecisionScope(Precision p) { cpu_backend().set_matmul_precision(p); }
  ~PrecisionScope() { cpu_backend().set_matmul_precision(Precision::kFp32); }
};

// Compares `got` with two double references per element: `exact` on the bf16-rounded inputs
// (within fp32 accumulation error, k terms of magnitude sum |terms|) and `plain` on the fp32
// inputs (within the bf16 input rounding, 2^-8 of sum |terms|). `scale` is sum |terms|.
struct Reference {
  std::vector<double> exact, plain, scale;
  int64_t terms = 0;
};

void expect_matches(const std::vector<float>& got, const Reference& r) {
  ASSERT_EQ(got.size(), r.exact.size());
  const double eps32 = std::ldexp(1.0, -24);
  double max_bf16_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double accumulation = double(r.terms + 2) * eps32 * r.scale[i] + 1e-30;
    ASSERT_LE(std::abs(got[i] - r.exact[i]), accumulation)
        << "element " << i << ": " << got[i] << " vs " << r.exact[i] << " on bf16 inputs";
    const double err = std::abs(got[i] - r.plain[i]);
    ASSERT_LE(err, std::ldexp(1.0, -8) * r.scale[i] + 1e-30)
        << "element " << i << ": " << got[i] << " vs " << r.plain[i] << " in fp32";
    max_bf16_err = std::max(max_bf16_err, err / (r.scale[i] + 1e-30));
  }
  // The inputs were rounded: fp32 products (error ~2^-24) would not differ this much.
  EXPECT_GT(max_bf16_err, std::ldexp(1.0, -14));
}

// C = alpha op(A) op(B) + beta C in double, from row-major A, B with leading dimensions.
Reference gemm_reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                         int64_t ldb, float beta, const std::vector<float>& c, int64_t ldc) {
  Reference r;
  r.terms = k;
  const std::vector<float> a16 = rounded(a), b16 = rounded(b);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, plain = 0, scale = 0;
      for (int64_t p = 0; p < k; ++p) {
        const size_t ai = size_t(ta ? p * lda + i : i * lda + p);
        const size_t bi = size_t(tb ? j * ldb + p : p * ldb + j);
        exact += double(a16[ai]) * b16[bi];
        plain += double(a[ai]) * b[bi];
        scale += std::abs(double(a[ai]) * b[bi]);
      }
      const double prev = beta * double(c[size_t(i * ldc + j)]);
      r.exact.push_back(alpha * exact + prev);
      r.plain.push_back(alpha * plain + prev);
      r.scale.push_back(std::abs(alpha) * scale + std::abs(prev));
    }
  return r;
}

std::vector<float> dense(const std::vector<float>& c, int64_t m, int64_t n, int64_t ldc) {
  std::vector<float> out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out.push_back(c[size_t(i * ldc + j)]);
  return out;
}

TEST(Bf16Matmul, MatchesReferenceOnRoundedInputsInEveryLayout) {
  SKIP_WITHOUT_BF16();
  const int64_t m = 37, n = 29, k = 67;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 2.0f}}) {
        SCOPED_TRACE(::testing::Message()
                     << "trans " << ta << tb << " alpha " << alpha << " beta " << beta);
        // Leading dimensions wider than the matrices: strided operands.
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
        const std::vector<float> a = random_vector((ta ? k : m) * lda, 1);
        const std::vector<float> b = random_vector((tb ? n : k) * ldb, 2);
        std::vector<float> c = random_vector(m * ldc, 3);
        const Reference r = gemm_reference(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        cpu::onednn_matmul(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(),
                           ldc, Precision::kBf16);
        expect_matches(dense(c, m, n, ldc), r);
      }
}

TEST(Bf16Matmul, BackendGemmFollowsThePrecisionSetting) {
  SKIP_WITHOUT_BF16();
  const int64_t m = 16, n = 24, k = 40;
  const std::vector<float> a = random_vector(m * k, 4), b = random_vector(k * n, 5);
  std::vector<float> want(size_t(m * n)), got(size_t(m * n)), fp32(size_t(m * n));
  cpu::onednn_matmul(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, want.data(), n,
                     Precision::kBf16);
  Backend& be = cpu_backend();
  EXPECT_EQ(be.matmul_precision(), Precision::kFp32);
  {
    PrecisionScope bf16(Precision::kBf16);
    EXPECT_EQ(be.matmul_precision(), Precision::kBf16);
    be.gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, got.data(), n);
  }
  EXPECT_EQ(got, want);
  be.gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, fp32.data(), n);
  EXPECT_NE(fp32, want);  // back to fp32
  // Rounded inputs give the same product in both precisions (bf16 values are exact in fp32),
  // up to accumulation order.
  const std::vector<float> a16 = rounded(a), b16 = rounded(b);
  std::vector<float> fp32_on_rounded(size_t(m * n));
  be.gemm(false, false, m, n, k, 1.0f, a16.data(), k, b16.data(), n, 0.0f, fp32_on_rounded.data(),
          n);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], fp32_on_rounded[i], 1e-5);
}

ConvGeometry geometry(int64_t batch, int64_t in_c, int64_t hw, int64_t out_c, int64_t k,
                      int64_t stride, int64_t pad) {
  const int64_t out = (hw + 2 * pad - (k - 1) - 1) / stride + 1;
  ConvGeometry g;
  g.batch = batch, g.in_c = in_c, g.in_h = g.in_w = hw, g.out_c = out_c;
  g.out_h = g.out_w = out, g.kernel_h = g.kernel_w = k, g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  return g;
}

// Calls f(n, o, c, oy, ox, input index, weight index, output index) for every term of the
// convolution (groups = 1, no dilation).
template <typename F>
void for_each_term(const ConvGeometry& g, F&& f) {
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t o = 0; o < g.out_c; ++o)
      for (int64_t oy = 0; oy < g.out_h; ++oy)
        for (int64_t ox = 0; ox < g.out_w; ++ox)
          for (int64_t c = 0; c < g.in_c; ++c)
            for (int64_t ky = 0; ky < g.kernel_h; ++ky)
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t iy = oy * g.stride_h - g.pad_h + ky;
                const int64_t ix = ox * g.stride_w - g.pad_w + kx;
                if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;
                f(size_t(((n * g.in_c + c) * g.in_h + iy) * g.in_w + ix),
                  size_t(((o * g.in_c + c) * g.kernel_h + ky) * g.kernel_w + kx),
                  size_t(((n * g.out_c + o) * g.out_h + oy) * g.out_w + ox));
              }
}

// Which output a term adds to: y (forward), dx (backward data) or dw (backward weights).
enum class ConvOutput { kY, kDx, kDw };

// The reference of one output, its operands being the two inputs that output's terms multiply.
Reference conv_reference(const ConvGeometry& g, ConvOutput out, const std::vector<float>& x,
                         const std::vector<float>& w, const std::vector<float>& dy) {
  const size_t size = out == ConvOutput::kY    ? dy.size()
                      : out == ConvOutput::kDx ? x.size()
                                               : w.size();
  Reference r;
  r.exact.assign(size, 0.0), r.plain.assign(size, 0.0), r.scale.assign(size, 0.0);
  const std::vector<float> x16 = rounded(x), w16 = rounded(w), dy16 = rounded(dy);
  for_each_term(g, [&](size_t xi, size_t wi, size_t yi) {
    size_t at;
    double exact, plain;
    if (out == ConvOutput::kY) {
      at = yi, exact = double(x16[xi]) * w16[wi], plain = double(x[xi]) * w[wi];
    } else if (out == ConvOutput::kDx) {
      at = xi, exact = double(w16[wi]) * dy16[yi], plain = double(w[wi]) * dy[yi];
    } else {
      at = wi, exact = double(x16[xi]) * dy16[yi], plain = double(x[xi]) * dy[yi];
    }
    r.exact[at] += exact, r.plain[at] += plain, r.scale[at] += std::abs(plain);
  });
  r.terms = out == ConvOutput::kY    ? g.in_c * g.kernel_h * g.kernel_w
            : out == ConvOutput::kDx ? g.out_c * g.kernel_h * g.kernel_w
                                     : g.batch * g.out_h * g.out_w;
  return r;
}

TEST(Bf16Conv, ForwardAndBothBackwardsMatchReferencesOnRoundedInputs) {
  SKIP_WITHOUT_BF16();
  // A 3x3 stride-2 padded convolution and a 1x1 one (channel counts not multiples of 16).
  for (const ConvGeometry& g : {geometry(2, 5, 9, 12, 3, 2, 1), geometry(3, 16, 6, 8, 1, 1, 0)}) {
    SCOPED_TRACE(::testing::Message() << "in_c " << g.in_c << " kernel " << g.kernel_h);
    const std::vector<float> x = random_vector(g.batch * g.in_c * g.in_h * g.in_w, 6);
    const std::vector<float> w = random_vector(g.out_c * g.in_c * g.kernel_h * g.kernel_w, 7);
    const std::vector<float> dy = random_vector(g.batch * g.out_c * g.out_h * g.out_w, 8);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), dx2(x.size()), dw2(w.size());
    cpu::onednn_conv_forward(g, x.data(), w.data(), nullptr, y.data(), Precision::kBf16);
    expect_matches(y, conv_reference(g, ConvOutput::kY, x, w, dy));
    cpu::onednn_conv_backward_data(g, w.data(), dy.data(), dx.data(), Precision::kBf16);
    expect_matches(dx, conv_reference(g, ConvOutput::kDx, x, w, dy));
    cpu::onednn_conv_backward_weights(g, x.data(), dy.data(), dw.data(), nullptr, Precision::kBf16);
    expect_matches(dw, conv_reference(g, ConvOutput::kDw, x, w, dy));
    // The training pair (x kept in the primitive's bf16 layout) gives the same gradients.
    std::vector<float> y2(y.size());
    cpu::onednn_conv_forward_training(g, x.data(), w.data(), nullptr, y2.data(), Precision::kBf16);
    cpu::onednn_conv_backward(g, x.data(), w.data(), dy.data(), dx2.data(), dw2.data(), nullptr,
                              Precision::kBf16);
    EXPECT_EQ(y2, y);
    EXPECT_EQ(dx2, dx);
    EXPECT_EQ(dw2, dw);
  }
}

TEST(Bf16Conv, BackendConvolutionFollowsThePrecisionSetting) {
  SKIP_WITHOUT_BF16();
  const ConvGeometry g = geometry(2, 4, 7, 6, 3, 1, 1);
  const std::vector<float> x = random_vector(g.batch * g.in_c * g.in_h * g.in_w, 9);
  const std::vector<float> w = random_vector(g.out_c * g.in_c * 9, 10);
  const std::vector<float> bias = random_vector(g.out_c, 11);
  const size_t ny = size_t(g.batch * g.out_c * g.out_h * g.out_w);
  std::vector<float> want(ny), got(ny), fp32(ny);
  cpu::onednn_conv_forward(g, x.data(), w.data(), bias.data(), want.data(), Precision::kBf16);
  {
    PrecisionScope bf16(Precision::kBf16);
    cpu_backend().conv2d_forward(g, x.data(), w.data(), bias.data(), got.data());
  }
  EXPECT_EQ(got, want);
  cpu_backend().conv2d_forward(g, x.data(), w.data(), bias.data(), fp32.data());
  EXPECT_NE(fp32, want);
}

TEST(Bf16Precision, OtherOpsStayFp32) {
  SKIP_WITHOUT_BF16();
  // axpy is not a matrix product: bit-identical whatever the setting.
  std::vector<float> x = random_vector(100, 12), y1 = random_vector(100, 13), y2 = y1;
  cpu_backend().axpy(100, 0.3f, x.data(), y1.data());
  {
    PrecisionScope bf16(Precision::kBf16);
    cpu_backend().axpy(100, 0.3f, x.data(), y2.data());
  }
  EXPECT_EQ(y1, y2);
}

TEST(Bf16Precision, UnsupportedPrecisionsAreConfigErrors) {
  Backend& be = cpu_backend();
  EXPECT_EQ(be.matmul_precision_unsupported(Precision::kFp32), "");
  try {
    be.set_matmul_precision(Precision::kFp16);
    FAIL() << "fp16 accepted on the CPU";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  cpu::hide_bf16_for_tests(true);
  try {
    be.set_matmul_precision(Precision::kBf16);
    cpu::hide_bf16_for_tests(false);
    FAIL() << "bf16 accepted without AVX512_BF16";
  } catch (const ConfigError& e) {
    cpu::hide_bf16_for_tests(false);
    EXPECT_NE(std::string(e.what()).find("avx512_bf16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(be.matmul_precision(), Precision::kFp32);
  EXPECT_EQ(be.matmul_precision_unsupported(Precision::kBf16).empty(), cpu_has_avx512_bf16());
}

}  // namespace
}  // namespace loom
