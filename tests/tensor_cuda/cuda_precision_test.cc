// bf16 and fp16 matrix products of the CUDA backend (Backend::set_matmul_precision): GEMM,
// batched GEMM and convolutions on both engines, each against a double reference on the
// inputs rounded to the format (nearest even) within fp32 accumulation error, and against the
// plain fp32 product within the format's input rounding (and farther from it than fp32 would
// be, so the rounding really happened); fp16's range ends in Inf where bf16's does not; the
// loss scaler's non-waiting overflow flag. Skipped without a GPU; bf16 also skips on a GPU
// before sm_80.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "loom/compress/half.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

float round_to(Precision p, float v) {
  if (p == Precision::kBf16) return compress::bf16_to_float_ref(compress::float_to_bf16_ref(v));
  if (p == Precision::kFp16) return compress::half_to_float_ref(compress::float_to_half_ref(v));
  return v;
}

// The backend in `p` for the scope, fp32 again after it.
class InPrecision {
 public:
  InPrecision(Backend& be, Precision p) : be_(be) { be_.set_matmul_precision(p); }
  ~InPrecision() { be_.set_matmul_precision(Precision::kFp32); }
  InPrecision(const InPrecision&) = delete;
  InPrecision& operator=(const InPrecision&) = delete;

 private:
  Backend& be_;
};

#define LOOM_REQUIRE_PRECISION(p)                                                    \
  do {                                                                               \
    LOOM_REQUIRE_GPU();                                                              \
    const std::string why_ = gpu().matmul_precision_unsupported(p);                  \
    if (!why_.empty()) GTEST_SKIP() << precision_name(p) << " cannot run: " << why_; \
  } while (0)

// Budgets, normalised MSE against the plain fp32 product: the inputs' relative rounding is up
// to 2^-9 (bf16) and 2^-12 (fp16) each, a product's about twice that, so the normalised MSE of
// a sum of many products sits near 2^-18 ~ 4e-6 (bf16) and 2^-24 ~ 6e-8 (fp16); cuDNN also
// rounds its output to the format once more. A product in fp32 stays below kNmseGemm (1e-10).
double low_budget(Precision p) {
  return p == Precision::kBf16 ? 1e-4 : 2e-6;
}

struct GemmShape {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
};

// C = alpha op(A) op(B) + beta C in double on the inputs as they are (fp32 reference) or
// rounded to p, and sum |terms| per element for the accumulation bound.
struct GemmRef {
  std::vector<double> c, scale;
};
GemmRef gemm_ref(const GemmShape& s, Precision p, float alpha, const std::vector<float>& a,
                 const std::vector<float>& b, float beta, const std::vector<float>& c0) {
  GemmRef r;
  r.c.assign(size_t(s.m * s.ldc), 0.0);
  r.scale.assign(r.c.size(), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t l = 0; l < s.k; ++l) {
        const float av = s.ta ? a[size_t(l * s.lda + i)] : a[size_t(i * s.lda + l)];
        const float bv = s.tb ? b[size_t(j * s.ldb + l)] : b[size_t(l * s.ldb + j)];
        const double t = double(round_to(p, av)) * double(round_to(p, bv));
        sum += t;
        mag += std::fabs(t);
      }
      const size_t o = size_t(i * s.ldc + j);
      r.c[o] = double(alpha) * sum + double(beta) * double(c0[o]);
      r.scale[o] = std::fabs(double(alpha)) * mag + std::fabs(double(beta) * double(c0[o]));
    }
  return r;
}

std::vector<float> as_floats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

void check_gemm(Precision p, const GemmShape& s, uint64_t seed, bool batched) {
  SCOPED_TRACE(::testing::Message()
               << precision_name(p) << " ta " << s.ta << " tb " << s.tb << " " << s.m << "x" << s.n
               << "x" << s.k << (batched ? " batched" : ""));
  const int64_t a_rows = s.ta ? s.k : s.m, b_rows = s.tb ? s.n : s.k;
  const int64_t batch = batched ? 3 : 1;
  const int64_t sa = a_rows * s.lda + 5, sb = b_rows * s.ldb + 3, sc = s.m * s.ldc + 7;
  const auto a = random_floats(size_t(batch * sa), seed);
  const auto b = random_floats(size_t(batch * sb), seed + 1);
  const auto c0 = random_floats(size_t(batch * sc), seed + 2);
  const float alpha = 0.75f, beta = 0.5f;
  auto da = upload(gpu(), a), db = upload(gpu(), b), dc = upload(gpu(), c0);
  {
    InPrecision in(gpu(), p);
    if (batched)
      gpu().gemm_batched(s.ta, s.tb, s.m, s.n, s.k, alpha, da.data(), s.lda, sa, db.data(), s.ldb,
                         sb, beta, dc.data(), s.ldc, sc, batch);
    else
      gpu().gemm(s.ta, s.tb, s.m, s.n, s.k, alpha, da.data(), s.lda, db.data(), s.ldb, beta,
                 dc.data(), s.ldc);
  }
  const std::vector<float> got = download(gpu(), dc);
  for (int64_t q = 0; q < batch; ++q) {
    const std::vector<float> aq(a.begin() + q * sa, a.begin() + (q + 1) * sa);
    const std::vector<float> bq(b.begin() + q * sb, b.begin() + (q + 1) * sb);
    const std::vector<float> cq(c0.begin() + q * sc, c0.begin() + q * sc + s.m * s.ldc);
    const GemmRef low = gemm_ref(s, p, alpha, aq, bq, beta, cq);
    const GemmRef full = gemm_ref(s, Precision::kFp32, alpha, aq, bq, beta, cq);
    std::vector<float> mine, want;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.ldc; ++j) {
        const size_t o = size_t(i * s.ldc + j);
        const float g = got[size_t(q * sc) + o];
        if (j >= s.n) {  // between rows: untouched
          EXPECT_EQ(g, cq[o]) << "padding at " << i << "," << j;
          continue;
        }
        // fp32 accumulation of k rounded products (tensor cores included): a few ulps of the
        // sum of |terms| per term.
        const double bound = double(s.k + 4) * std::ldexp(1.0, -22) * low.scale[o] + 1e-30;
        EXPECT_LE(std::fabs(double(g) - low.c[o]), bound)
            << "element " << i << "," << j << " of matrix " << q << ": " << g << " vs " << low.c[o]
            << " on rounded inputs";
        mine.push_back(g);
        want.push_back(float(full.c[o]));
      }
    const double e = nmse(mine, want);
    EXPECT_LE(e, low_budget(p));
    EXPECT_GT(e, kNmseGemm) << "no farther from fp32 than fp32 itself: inputs not rounded?";
  }
}

const GemmShape kShapes[] = {
    {false, false, 33, 47, 65, 70, 50, 49},  // strided rows everywhere
    {true, false, 40, 31, 129, 41, 33, 31},
    {false, true, 17, 64, 96, 96, 100, 64},
    {true, true, 64, 8, 257, 64, 260, 9},
};

TEST(CudaPrecision, Bf16GemmMatchesRoundedReference) {
  LOOM_REQUIRE_PRECISION(Precision::kBf16);
  uint64_t seed = 900;
  for (const GemmShape& s : kShapes) {
    check_gemm(Precision::kBf16, s, seed, false);
    check_gemm(Precision::kBf16, s, seed + 3, true);
    seed += 10;
  }
}

TEST(CudaPrecision, Fp16GemmMatchesRoundedReference) {
  LOOM_REQUIRE_PRECISION(Precision::kFp16);
  uint64_t seed = 950;
  for (const GemmShape& s : kShapes) {
    check_gemm(Precision::kFp16, s, seed, false);
    check_gemm(Precision::kFp16, s, seed + 3, true);
    seed += 10;
  }
}

// fp16 ends at 65504: an input beyond it becomes Inf, and so does its product; bf16 keeps
// fp32's range. What the loss scaler looks for, found by note_non_finite without waiting.
TEST(CudaPrecision, Fp16OverflowsWhereBf16DoesNot) {
  LOOM_REQUIRE_PRECISION(Precision::kFp16);
  const std::vector<float> a = {70000.0f, 1.0f}, b = {1.0f, 1.0f};
  auto da = upload(gpu(), a), db = upload(gpu(), b);
  DeviceBuffer<float> c(gpu(), 1), flag(gpu(), 1);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    if (!gpu().matmul_precision_unsupported(p).empty()) continue;
    {
      InPrecision in(gpu(), p);
      gpu().gemm(false, false, 1, 1, 2, 1.0f, da.data(), 2, db.data(), 1, 0.0f, c.data(), 1);
    }
    gpu().fill(flag.data(), 1, 0.0f);
    gpu().note_non_finite(c.data(), 1, flag.data());
    const float got = download(gpu(), c)[0], flagged = download(gpu(), flag)[0];
    if (p == Precision::kFp16) {
      EXPECT_TRUE(std::isinf(got)) << got;
      EXPECT_EQ(flagged, 1.0f);
    } else {
      EXPECT_TRUE(std::isfinite(got)) << got;
      EXPECT_EQ(flagged, 0.0f);
    }
  }
}

// A convolution in `p` on `be` against the CPU's fp32 convolution of the same inputs.
void check_conv(CudaBackend& be, Precision p, const ConvGeometry& g, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << precision_name(p) << " " << be.conv_engine() << " " << cuda::describe_conv(g));
  const size_t nx = size_t(g.batch * g.in_c * g.in_h * g.in_w);
  const size_t ny = size_t(g.batch * g.out_c * g.out_h * g.out_w);
  const size_t nw = size_t(g.out_c * (g.in_c / g.groups) * g.kernel_h * g.kernel_w);
  const auto x = random_floats(nx, seed), w = random_floats(nw, seed + 1);
  const auto dy = random_floats(ny, seed + 2), bias = random_floats(size_t(g.out_c), seed + 3);
  std::vector<float> y(ny), dx(nx), dw(nw), db(size_t(g.out_c));
  cpu_backend().conv2d_forward(g, x.data(), w.data(), bias.data(), y.data());
  cpu_backend().conv2d_backward_data(g, w.data(), dy.data(), dx.data());
  cpu_backend().conv2d_backward_weights(g, x.data(), dy.data(), dw.data(), db.data());
  auto gx = upload(be, x), gw = upload(be, w), gdy = upload(be, dy), gb = upload(be, bias);
  DeviceBuffer<float> gy(be, int64_t(ny)), gdx(be, int64_t(nx)), gdw(be, int64_t(nw)),
      gdb(be, g.out_c);
  {
    InPrecision in(be, p);
    be.conv2d_forward(g, gx.data(), gw.data(), gb.data(), gy.data());
    be.conv2d_backward_data(g, gw.data(), gdy.data(), gdx.data());
    be.conv2d_backward_weights(g, gx.data(), gdy.data(), gdw.data(), gdb.data());
  }
  const std::pair<const char*, double> errors[] = {
      {"forward", nmse(download(be, gy), y)},
      {"backward data", nmse(download(be, gdx), dx)},
      {"backward weights", nmse(download(be, gdw), dw)},
  };
  for (const auto& [what, e] : errors) {
    EXPECT_LE(e, low_budget(p)) << what;
    EXPECT_GT(e, kNmseGemm) << what << ": no farther from fp32 than fp32: inputs not rounded?";
  }
  // The bias gradient is a reduction of the fp32 dy in every precision.
  EXPECT_LE(nmse(download(be, gdb), db), kNmseCudnnConv);
}

ConvGeometry conv_geometry(int64_t batch, int64_t in_c, int64_t hw, int64_t out_c, int64_t k,
                           int64_t stride, int64_t pad, int64_t groups) {
  ConvGeometry g;
  g.batch = batch;
  g.in_c = in_c;
  g.in_h = g.in_w = hw;
  g.out_c = out_c;
  g.kernel_h = g.kernel_w = k;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.groups = groups;
  g.out_h = g.out_w = (hw + 2 * pad - k) / stride + 1;
  return g;
}

const ConvGeometry kConvs[] = {
    conv_geometry(4, 16, 12, 32, 3, 1, 1, 1),  // 3x3 "same"
    conv_geometry(2, 8, 15, 16, 3, 2, 1, 1),   // 3x3 stride 2
    conv_geometry(3, 16, 8, 16, 1, 1, 0, 1),   // 1x1 direct
    conv_geometry(2, 8, 9, 8, 3, 1, 1, 2),     // groups 2
};

void check_engine(CudaBackend::ConvEngine engine, uint64_t seed) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    CudaBackend be(0);
    if (!be.matmul_precision_unsupported(p).empty()) continue;
    try {
      be.set_conv_engine(engine);
    } catch (const ConfigError& e) {
      GTEST_SKIP() << "cuDNN cannot run here: " << e.what();
    }
    for (const ConvGeometry& g : kConvs) check_conv(be, p, g, seed++);
    if (engine == CudaBackend::ConvEngine::kCudnn) {
      EXPECT_EQ(be.cudnn_stats().declined, 0);
    }
  }
}

TEST(CudaPrecision, ConvolutionOnLoomKernelsInLowPrecisionMatchesCpu) {
  LOOM_REQUIRE_GPU();
  check_engine(CudaBackend::ConvEngine::kLoom, 1200);
}

TEST(CudaPrecision, ConvolutionOnCudnnInLowPrecisionMatchesCpu) {
  LOOM_REQUIRE_GPU();
  check_engine(CudaBackend::ConvEngine::kCudnn, 1300);
}

TEST(CudaPrecision, BothPrecisionsAreOfferedOnAnAmpereOrLaterGpu) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(gpu().matmul_precision_unsupported(Precision::kFp16), "");
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major >= 8)
    EXPECT_EQ(gpu().matmul_precision_unsupported(Precision::kBf16), "");
  else
    EXPECT_NE(gpu().matmul_precision_unsupported(Precision::kBf16).find("sm_80"),
              std::string::npos);
}

}  // namespace
}  // namespace loom::test
