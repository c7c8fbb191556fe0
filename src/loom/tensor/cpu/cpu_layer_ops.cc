// The CPU backend's ops for the layers of modern CNNs: convolution (oneDNN), activations,
// pooling with padding and ceil mode, and batch normalisation. Loops are written branch-free
// in the body where the compiler can vectorise them; sums over a batch accumulate in double.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/tensor/cpu/onednn_conv.h"
#include "loom/tensor/cpu/vector_math.h"

namespace loom {

// ---- convolution ----

void CpuBackend::conv2d_forward(const ConvGeometry& g, const float* x, const float* w,
                                const float* bias, float* y) {
  cpu::onednn_conv_forward(g, x, w, bias, y, matmul_precision());
}

void CpuBackend::conv2d_forward_training(const ConvGeometry& g, const float* x, const float* w,
                                         const float* bias, float* y) {
  cpu::onednn_conv_forward_training(g, x, w, bias, y, matmul_precision());
}

void CpuBackend::conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                                      float* dx) {
  cpu::onednn_conv_backward_data(g, w, dy, dx, matmul_precision());
}

void CpuBackend::conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy,
                                         float* dw, float* dbias) {
  cpu::onednn_conv_backward_weights(g, x, dy, dw, dbias, matmul_precision());
}

void CpuBackend::conv2d_backward(const ConvGeometry& g, const float* x, const float* w,
                                 const float* dy, float* dx, float* dw, float* dbias) {
  cpu::onednn_conv_backward(g, x, w, dy, dx, dw, dbias, matmul_precision());
}

// ---- activations ----

namespace {
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// min(max(x / 6 + 1/2, 0), 1), as PyTorch's Hardsigmoid.
inline float hard_sigmoid(float x) {
  return std::min(std::max(x * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
}
}  // namespace

void CpuBackend::activation_forward(Activation kind, float alpha, const float* __restrict x,
                                    float* __restrict y, int64_t n) {
  switch (kind) {
    case Activation::kRelu:
      relu_forward(x, y, n);
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * cpu::normal_cdf(x[i]);
      return;
    case Activation::kSilu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case Activation::kRelu6:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], 0.0f), 6.0f);
      return;
    case Activation::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = hard_sigmoid(x[i]);
      return;
    case Activation::kHardSwish:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * hard_sigmoid(x[i]);
      return;
  }
  throw Error(fmt::format("activation_forward: unknown activation {}", int(kind)));
}

void CpuBackend::activation_backward(Activation kind, float alpha, const float* __restrict x,
                                     const float* __restrict y, const float* __restrict dy,
                                     float* __restrict dx, int64_t n) {
  switch (kind) {
    case Activation::kRelu:
      relu_backward(y, dy, dx, n);
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i];
      return;
    case Activation::kGelu:
      // d/dx x Phi(x) = Phi(x) + x phi(x). Phi(x) is y / x, the forward's own value within two
      // roundings, which spares a second evaluation of the CDF (its exponential and division
      // were 40% of GELU's backward). At x = 0, Phi is 1/2; where x Phi(x) underflows (x below
      // -13.2) both terms are below 1e-36 in size and the quotient's loss does not matter.
      for (int64_t i = 0; i < n; ++i) {
        const float pdf = kInvSqrt2Pi * cpu::exp_approx(-0.5f * x[i] * x[i]);
        const float cdf = x[i] != 0.0f ? y[i] / x[i] : 0.5f;
        dx[i] = dy[i] * (cdf + x[i] * pdf);
      }
      return;
    case Activation::kSilu:
      // d/dx x s(x) = s (1 + x (1 - s))
      for (int64_t i = 0; i < n; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-x[i]));
        dx[i] = dy[i] * (s * (1.0f + x[i] * (1.0f - s)));
      }
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
      return;
    case Activation::kRelu6:
      // PyTorch's gradient: 1 strictly inside (0, 6), 0 at and beyond the ends.
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f;
      return;
    case Activation::kHardSigmoid:
      // 1/6 strictly inside (-3, 3), as PyTorch's.
      for (int64_t i = 0; i < n; ++i)
        dx[i] = x[i] > -3.0f && x[i] < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f;
      return;
    case Activation::kHardSwish:
      // d/dx x h(x): 0 below -3, 1 above 3, x / 3 + 1/2 between (PyTorch's, with x = 3 on the
      // linear side).
      for (int64_t i = 0; i < n; ++i)
        dx[i] = x[i] < -3.0f ? 0.0f : x[i] > 3.0f ? dy[i] : dy[i] * (x[i] * (1.0f / 3.0f) + 0.5f);
      return;
  }
  throw Error(fmt::format("activation_backward: unknown activation {}", int(kind)));
}

// ---- pooling ----

namespace {

// The input rows or columns [begin, end) of output position o, clipped to the input, and the
// window's extent clipped to the padded input (PyTorch's count_include_pad divisor).
struct Span {
  int64_t begin, end, padded;
};
Span window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in) {
  const int64_t start = o * stride - pad;
  const int64_t stop = std::min(start + kernel, in + pad);
  return {std::max<int64_t>(start, 0), std::min(stop, in), stop - start};
}

}  // namespace

namespace {

// A window's first maximum, with PyTorch's rule that a NaN wins; branch-free selects, so the
// compiler turns the compares into blends.
inline void take(float v, int64_t idx, float& mx, int64_t& best) {
  const bool gt = v > mx || v != v;
  mx = gt ? v : mx;
  best = gt ? idx : best;
}

// The CNN's case, window = stride = 2, no padding: fixed trip counts the compiler unrolls.
void maxpool_tiled2(const PoolGeometry& g, const float* x, float* y, int32_t* argmax) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const float* r0 = x + p * in_plane + 2 * oy * g.in_w;
      const float* r1 = r0 + g.in_w;
      float* out = y + p * out_plane + oy * g.out_w;
      int32_t* arg = argmax + p * out_plane + oy * g.out_w;
      const int64_t base = 2 * oy * g.in_w;
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        float mx = r0[2 * ox];
        int64_t best = base + 2 * ox;
        take(r0[2 * ox + 1], base + 2 * ox + 1, mx, best);
        take(r1[2 * ox], base + g.in_w + 2 * ox, mx, best);
        take(r1[2 * ox + 1], base + g.in_w + 2 * ox + 1, mx, best);
        out[ox] = mx;
        arg[ox] = int32_t(best);
      }
    }
}

}  // namespace

void CpuBackend::maxpool2d_forward(const PoolGeometry& g, const float* x, float* y,
                                   int32_t* argmax) {
  if (g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 &&
      g.pad_w == 0 && 2 * g.out_h <= g.in_h && 2 * g.out_w <= g.in_w)
    return maxpool_tiled2(g, x, y, argmax);
  // The column spans are the same for every row and plane.
  std::vector<Span> cols(static_cast<size_t>(g.out_w));
  for (int64_t ox = 0; ox < g.out_w; ++ox)
    cols[size_t(ox)] = window(ox, g.stride_w, g.pad_w, g.kernel_w, g.in_w);
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* in = x + p * in_plane;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const Span sy = window(oy, g.stride_h, g.pad_h, g.kernel_h, g.in_h);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const Span& sx = cols[size_t(ox)];
        int64_t best = sy.begin * g.in_w + sx.begin;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t iy = sy.begin; iy < sy.end; ++iy)
          for (int64_t ix = sx.begin; ix < sx.end; ++ix)
            take(in[iy * g.in_w + ix], iy * g.in_w + ix, mx, best);
        const int64_t o = p * out_plane + oy * g.out_w + ox;
        y[o] = mx;
        argmax[o] = int32_t(best);
      }
    }
  }
}

void CpuBackend::maxpool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax,
                                    float* dx) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  std::memset(dx, 0, sizeof(float) * size_t(g.planes * in_plane));
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t o = 0; o < out_plane; ++o)
      dx[p * in_plane + argmax[p * out_plane + o]] += dy[p * out_plane + o];
}

void CpuBackend::avgpool2d_forward(const PoolGeometry& g, bool count_include_pad, const float* x,
                                   float* y) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* in = x + p * in_plane;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const Span sy = window(oy, g.stride_h, g.pad_h, g.kernel_h, g.in_h);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const Span sx = window(ox, g.stride_w, g.pad_w, g.kernel_w, g.in_w);
        float acc = 0.0f;
        for (int64_t iy = sy.begin; iy < sy.end; ++iy)
          for (int64_t ix = sx.begin; ix < sx.end; ++ix) acc += in[iy * g.in_w + ix];
        const int64_t count =
            count_include_pad ? sy.padded * sx.padded : (sy.end - sy.begin) * (sx.end - sx.begin);
        y[p * out_plane + oy * g.out_w + ox] = acc / float(count);
      }
    }
  }
}

void CpuBackend::avgpool2d_backward(const PoolGeometry& g, bool count_include_pad, const float* dy,
                                    float* dx) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  std::memset(dx, 0, sizeof(float) * size_t(g.planes * in_plane));
  for (int64_t p = 0; p < g.planes; ++p) {
    float* out = dx + p * in_plane;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const Span sy = window(oy, g.stride_h, g.pad_h, g.kernel_h, g.in_h);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const Span sx = window(ox, g.stride_w, g.pad_w, g.kernel_w, g.in_w);
        const int64_t count =
            count_include_pad ? sy.padded * sx.padded : (sy.end - sy.begin) * (sx.end - sx.begin);
        const float share = dy[p * out_plane + oy * g.out_w + ox] / float(count);
        for (int64_t iy = sy.begin; iy < sy.end; ++iy)
          for (int64_t ix = sx.begin; ix < sx.end; ++ix) out[iy * g.in_w + ix] += share;
      }
    }
  }
}

// ---- batch normalisation ----

namespace {

// sum += lanes 0..15 of (lo, hi), one at a time in lane order.
void add_lanes(__m256 lo, __m256 hi, double& sum) {
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  for (int j = 0; j < 16; ++j) sum += lanes[j];
}

// Sums of (row[i] - k) and (row[i] - k)^2 over one image plane in 16 float lanes (element i
// in lane i mod 16; a plane holds at most a few thousand values, so float lanes lose nothing
// that matters); the elements past the last 16, the lanes in order, and then the planes are
// added in double. The lanes are two AVX2 registers written out: left to the compiler, GCC
// vectorised the loop over planes' 16-element groups instead, with permutes and spills, and the
// two BatchNorm sums took a tenth of ResNet-20's step.
void plane_moments(const float* __restrict row, int64_t n, float k, double& s1, double& s2) {
  const __m256 kk = _mm256_set1_ps(k);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(row + i), kk);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(row + i + 8), kk);
    a0 = _mm256_add_ps(a0, d0);
    a1 = _mm256_add_ps(a1, d1);
    b0 = _mm256_fmadd_ps(d0, d0, b0);
    b1 = _mm256_fmadd_ps(d1, d1, b1);
  }
  double sa = 0, sb = 0;
  for (; i < n; ++i) {
    const double d = double(row[i]) - double(k);
    sa += d;
    sb += d * d;
  }
  add_lanes(a0, a1, sa);
  add_lanes(b0, b1, sb);
  s1 += sa;
  s2 += sb;
}

// Sums of dy and dy (x - m) over one plane, the same way.
void plane_grad_sums(const float* __restrict x, const float* __restrict dy, int64_t n, float m,
                     double& s_dy, double& s_dy_xmu) {
  const __m256 mm = _mm256_set1_ps(m);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 g0 = _mm256_loadu_ps(dy + i), g1 = _mm256_loadu_ps(dy + i + 8);
    a0 = _mm256_add_ps(a0, g0);
    a1 = _mm256_add_ps(a1, g1);
    b0 = _mm256_fmadd_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i), mm), b0);
    b1 = _mm256_fmadd_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mm), b1);
  }
  double sa = 0, sb = 0;
  for (; i < n; ++i) {
    sa += double(dy[i]);
    sb += double(dy[i]) * (double(x[i]) - double(m));
  }
  add_lanes(a0, a1, sa);
  add_lanes(b0, b1, sb);
  s_dy += sa;
  s_dy_xmu += sb;
}

// Channel c of y = x a + b with a = gamma istd, b = beta - mean a, as PyTorch's CPU kernel
// computes it.
void normalise_channel(const float* x, int64_t batch, int64_t channels, int64_t plane, int64_t c,
                       float mean, float var, float eps, float gamma, float beta, float* y) {
  const float a = gamma / std::sqrt(var + eps);
  const float b = beta - mean * a;
  for (int64_t n = 0; n < batch; ++n) {
    const float* __restrict in = x + (n * channels + c) * plane;
    float* __restrict out = y + (n * channels + c) * plane;
    for (int64_t i = 0; i < plane; ++i) out[i] = in[i] * a + b;
  }
}

// Channel c's sum of dy and of dy xhat.
void reduce_channel(const float* x, const float* dy, int64_t batch, int64_t channels, int64_t plane,
                    int64_t c, float mean, float var, float eps, float& sum_dy,
                    float& sum_dy_xhat) {
  double s_dy = 0, s_dy_xmu = 0;
  for (int64_t n = 0; n < batch; ++n)
    plane_grad_sums(x + (n * channels + c) * plane, dy + (n * channels + c) * plane, plane, mean,
                    s_dy, s_dy_xmu);
  sum_dy = float(s_dy);
  sum_dy_xhat = float(s_dy_xmu / std::sqrt(double(var) + double(eps)));
}

// Channel c of dx (batchnorm_backward_data); null sums stand for zeros.
void data_channel(const float* x, const float* dy, int64_t batch, int64_t channels, int64_t plane,
                  int64_t c, float mean, float var, float eps, float gamma, const float* sum_dy,
                  const float* sum_dy_xhat, double count, float* dx) {
  const double istd = 1.0 / std::sqrt(double(var) + double(eps));
  // dx = a (dy - b - (x - mean) k)
  const float a = float(double(gamma) * istd);
  const float b = sum_dy ? float(double(*sum_dy) / count) : 0.0f;
  const float k = sum_dy_xhat ? float(double(*sum_dy_xhat) * istd / count) : 0.0f;
  for (int64_t n = 0; n < batch; ++n) {
    const float* __restrict in = x + (n * channels + c) * plane;
    const float* __restrict d = dy + (n * channels + c) * plane;
    float* __restrict out = dx + (n * channels + c) * plane;
    for (int64_t i = 0; i < plane; ++i) out[i] = a * (d[i] - b - (in[i] - mean) * k);
  }
}

// Planes smaller than plane_moments' 16 lanes (MobileNets' late stages: 2 x 2, 4 x 4) go
// sample by sample over each [channels, plane] block, so memory is read in order and no lane
// reduction is paid per few values. Each plane's sums are the ones plane_moments and
// plane_grad_sums form for such a plane (the lanes add +0.0), added in the same order over the
// samples, so the results are the same bits.
constexpr int64_t kSmallPlane = 16;

void small_planes_forward_training(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                   float inv_count, float eps, const float* gamma,
                                   const float* beta, float* mean, float* var, float* sumsq,
                                   float* y) {
  std::vector<double> s(size_t(channels), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* row = x + (n * channels + c) * plane;
      double sa = 0;
      for (int64_t i = 0; i < plane; ++i) sa += double(row[i]);
      s[size_t(c)] += sa + 0.0;
    }
  for (int64_t c = 0; c < channels; ++c) mean[c] = float(s[size_t(c)]) * inv_count;
  std::fill(s.begin(), s.end(), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* row = x + (n * channels + c) * plane;
      const double k = double(mean[c]);
      double sb = 0;
      for (int64_t i = 0; i < plane; ++i) {
        const double d = double(row[i]) - k;
        sb += d * d;
      }
      s[size_t(c)] += sb + 0.0;
    }
  std::vector<float> a(static_cast<size_t>(channels)), b(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    sumsq[c] = float(s[size_t(c)]);
    var[c] = sumsq[c] * inv_count;
    a[size_t(c)] = gamma[c] / std::sqrt(var[c] + eps);
    b[size_t(c)] = beta[c] - mean[c] * a[size_t(c)];
  }
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* __restrict in = x + (n * channels + c) * plane;
      float* __restrict out = y + (n * channels + c) * plane;
      const float ac = a[size_t(c)], bc = b[size_t(c)];
      for (int64_t i = 0; i < plane; ++i) out[i] = in[i] * ac + bc;
    }
}

void small_planes_backward(const float* x, const float* dy, int64_t batch, int64_t channels,
                           int64_t plane, const float* mean, const float* var, float eps,
                           const float* gamma, double count, float* sum_dy, float* sum_dy_xhat,
                           float* dx) {
  std::vector<double> s_dy(size_t(channels), 0.0), s_xmu(size_t(channels), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* in = x + (n * channels + c) * plane;
      const float* d = dy + (n * channels + c) * plane;
      const double m = double(mean[c]);
      double sa = 0, sb = 0;
      for (int64_t i = 0; i < plane; ++i) {
        sa += double(d[i]);
        sb += double(d[i]) * (double(in[i]) - m);
      }
      s_dy[size_t(c)] += sa + 0.0;
      s_xmu[size_t(c)] += sb + 0.0;
    }
  const size_t cs = static_cast<size_t>(channels);
  std::vector<float> a(cs), b(cs), k(cs);
  for (int64_t c = 0; c < channels; ++c) {
    sum_dy[c] = float(s_dy[size_t(c)]);
    sum_dy_xhat[c] = float(s_xmu[size_t(c)] / std::sqrt(double(var[c]) + double(eps)));
    // As data_channel: dx = a (dy - b - (x - mean) k).
    const double istd = 1.0 / std::sqrt(double(var[c]) + double(eps));
    a[size_t(c)] = float(double(gamma[c]) * istd);
    b[size_t(c)] = float(double(sum_dy[c]) / count);
    k[size_t(c)] = float(double(sum_dy_xhat[c]) * istd / count);
  }
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* __restrict in = x + (n * channels + c) * plane;
      const float* __restrict d = dy + (n * channels + c) * plane;
      float* __restrict out = dx + (n * channels + c) * plane;
      const float ac = a[size_t(c)], bc = b[size_t(c)], kc = k[size_t(c)], mc = mean[c];
      for (int64_t i = 0; i < plane; ++i) out[i] = ac * (d[i] - bc - (in[i] - mc) * kc);
    }
}

}  // namespace

void CpuBackend::channel_moments(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                 const float* shift, float* sum, float* sumsq) {
  std::vector<double> s1(size_t(channels), 0.0), s2(size_t(channels), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      plane_moments(x + (n * channels + c) * plane, plane, shift ? shift[c] : 0.0f, s1[size_t(c)],
                    s2[size_t(c)]);
  for (int64_t c = 0; c < channels; ++c) {
    if (sum) sum[c] = float(s1[size_t(c)]);
    if (sumsq) sumsq[c] = float(s2[size_t(c)]);
  }
}

void CpuBackend::batchnorm_forward(const float* x, int64_t batch, int64_t channels, int64_t plane,
                                   const float* mean, const float* var, float eps,
                                   const float* gamma, const float* beta, float* y) {
  for (int64_t c = 0; c < channels; ++c)
    normalise_channel(x, batch, channels, plane, c, mean[c], var[c], eps, gamma[c], beta[c], y);
}

void CpuBackend::batchnorm_forward_training(const float* x, int64_t batch, int64_t channels,
                                            int64_t plane, float inv_count, float eps,
                                            const float* gamma, const float* beta, float* mean,
                                            float* var, float* sumsq, float* y) {
  if (plane < kSmallPlane)
    return small_planes_forward_training(x, batch, channels, plane, inv_count, eps, gamma, beta,
                                         mean, var, sumsq, y);
  // Channel by channel (a channel of a ResNet batch is a few hundred KB), so the second and
  // third passes read it from cache; the same sums in the same order as channel_moments.
  for (int64_t c = 0; c < channels; ++c) {
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < batch; ++n)
      plane_moments(x + (n * channels + c) * plane, plane, 0.0f, s1, s2);
    mean[c] = float(s1) * inv_count;
    s1 = s2 = 0;
    for (int64_t n = 0; n < batch; ++n)
      plane_moments(x + (n * channels + c) * plane, plane, mean[c], s1, s2);
    sumsq[c] = float(s2);
    var[c] = sumsq[c] * inv_count;
    normalise_channel(x, batch, channels, plane, c, mean[c], var[c], eps, gamma[c], beta[c], y);
  }
}

void CpuBackend::batchnorm_backward_reduce(const float* x, const float* dy, int64_t batch,
                                           int64_t channels, int64_t plane, const float* mean,
                                           const float* var, float eps, float* sum_dy,
                                           float* sum_dy_xhat) {
  for (int64_t c = 0; c < channels; ++c)
    reduce_channel(x, dy, batch, channels, plane, c, mean[c], var[c], eps, sum_dy[c],
                   sum_dy_xhat[c]);
}

void CpuBackend::batchnorm_backward_data(const float* x, const float* dy, int64_t batch,
                                         int64_t channels, int64_t plane, const float* mean,
                                         const float* var, float eps, const float* gamma,
                                         const float* sum_dy, const float* sum_dy_xhat,
                                         double count, float* dx) {
  for (int64_t c = 0; c < channels; ++c)
    data_channel(x, dy, batch, channels, plane, c, mean[c], var[c], eps, gamma[c],
                 sum_dy ? &sum_dy[c] : nullptr, sum_dy_xhat ? &sum_dy_xhat[c] : nullptr, count, dx);
}

void CpuBackend::batchnorm_backward(const float* x, const float* dy, int64_t batch,
                                    int64_t channels, int64_t plane, const float* mean,
                                    const float* var, float eps, const float* gamma, double count,
                                    float* sum_dy, float* sum_dy_xhat, float* dx) {
  if (plane < kSmallPlane)
    return small_planes_backward(x, dy, batch, channels, plane, mean, var, eps, gamma, count,
                                 sum_dy, sum_dy_xhat, dx);
  // Channel by channel, so the data pass reads x and dy from cache.
  for (int64_t c = 0; c < channels; ++c) {
    reduce_channel(x, dy, batch, channels, plane, c, mean[c], var[c], eps, sum_dy[c],
                   sum_dy_xhat[c]);
    data_channel(x, dy, batch, channels, plane, c, mean[c], var[c], eps, gamma[c], &sum_dy[c],
                 &sum_dy_xhat[c], count, dx);
  }
}

}  // namespace loom
