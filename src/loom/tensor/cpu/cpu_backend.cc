#include "loom/tensor/cpu/cpu_backend.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "loom/core/cpu_features.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/tensor/cpu/gemm.h"
#include "loom/tensor/cpu/onednn_matmul.h"
#include "loom/tensor/cpu/philox_blocks.h"

namespace loom {

std::string CpuBackend::name() const {
  return "cpu (" + cpu::gemm_library_name(cpu::gemm_library()) + ")";
}

void* CpuBackend::allocate(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}
void CpuBackend::deallocate(void* p) {
  std::free(p);
}
void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  std::memmove(dst, src, bytes);
}
void CpuBackend::fill(float* x, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}
void CpuBackend::copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                           int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_stride, src + r * src_stride, size_t(cols) * sizeof(float));
}
void CpuBackend::set_intra_op_threads(int threads) {
  cpu::set_gemm_threads(threads);
  // Worker threads compute with denormals flushed to zero (FTZ, DAZ): momentum buffers and
  // small gradients decay into the denormal range late in training, where every operation on
  // them costs ~100 cycles; their contribution to the update is below float resolution anyway.
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

void CpuBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                      float* c, int64_t ldc) {
  // bf16 runs on oneDNN's matmul primitive whichever library LOOM_GEMM picks for fp32 (the
  // others have no bf16 GEMM); an empty product keeps sgemm's handling.
  if (matmul_precision() == Precision::kBf16 && m > 0 && n > 0 && k > 0) {
    cpu::onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                       Precision::kBf16);
    return;
  }
  cpu::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string CpuBackend::matmul_precision_unsupported(Precision p) const {
  switch (p) {
    case Precision::kFp32:
      return "";
    case Precision::kBf16:
      if (cpu::bf16_hidden_for_tests() || !cpu_has_avx512_bf16())
        return "this CPU lacks AVX512_BF16 (the avx512_bf16 flag of /proc/cpuinfo), which "
               "oneDNN's bf16 matmul and convolution kernels need";
      return "";
    case Precision::kFp16:
      return "fp16 matrix products run on backend = \"cuda\" only";
  }
  return "unknown precision";
}

void CpuBackend::add_bias(float* __restrict y, const float* __restrict bias, int64_t rows,
                          int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict row = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void CpuBackend::sum_rows(const float* __restrict dy, float* __restrict dbias, int64_t rows,
                          int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) dbias[c] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict row = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += row[c];
  }
}

void CpuBackend::add_channel_bias(float* __restrict y, const float* __restrict bias,
                                  int64_t channels, int64_t plane) {
  for (int64_t c = 0; c < channels; ++c) {
    float* __restrict row = y + c * plane;
    const float b = bias[c];
    for (int64_t i = 0; i < plane; ++i) row[i] += b;
  }
}

void CpuBackend::accumulate_channel_sums(const float* __restrict dy, float* __restrict dbias,
                                         int64_t channels, int64_t plane) {
  for (int64_t c = 0; c < channels; ++c) {
    const float* __restrict row = dy + c * plane;
    float acc = 0.0f;
    for (int64_t i = 0; i < plane; ++i) acc += row[i];
    dbias[c] += acc;
  }
}

void CpuBackend::axpy(int64_t n, float alpha, const float* __restrict x, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void CpuBackend::scale(int64_t n, float alpha, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

namespace {
void relu_apart(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
}  // namespace

void CpuBackend::relu_forward(const float* x, float* y, int64_t n) {
  if (x != y) return relu_apart(x, y, n);
  // In place (Model, "in place"): one pointer, so it vectorises without restrict.
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

void CpuBackend::relu_backward(const float* __restrict y, const float* __restrict dy,
                               float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void CpuBackend::dropout_forward(const float* __restrict x, float* __restrict y,
                                 uint8_t* __restrict mask, int64_t n, float p, uint64_t key,
                                 uint64_t first_index) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  // Element i is kept iff philox_uniform(key, first_index + i) >= p, i.e. iff its draw's top 24
  // bits u satisfy u * 2^-24 >= p, i.e. u >= ceil(p * 2^24): an integer test, exact.
  const uint32_t threshold = uint32_t(std::ceil(double(p) * 16777216.0));
  const uint64_t total = uint64_t(n);
  uint64_t i = 0;
  // Head and tail: one block at a time, until element first_index + i starts a block.
  auto scalar_until = [&](uint64_t stop) {
    while (i < stop) {
      const uint64_t j = first_index + i;
      const auto block = philox4x32({uint32_t(j >> 2), uint32_t(j >> 34), 0, 0}, key);
      for (uint64_t w = j & 3; w < 4 && i < stop; ++w, ++i) {
        const uint8_t keep = (block[w] >> 8) >= threshold;
        mask[i] = keep;
        y[i] = x[i] * (float(keep) * keep_scale);
      }
    }
  };
  scalar_until(std::min(total, (4 - (first_index & 3)) & 3));
  // The draws come kPhiloxBlocks at a time: twice as many per call on AVX-512 (16 lanes).
  const bool wide = cpu_has_avx512();
  const uint64_t chunk = 4 * uint64_t(wide ? cpu::kPhiloxWideBlocks : cpu::kPhiloxBlocks);
  alignas(64) uint32_t words[4 * cpu::kPhiloxWideBlocks];
  while (total - i >= chunk) {
    if (wide) {
      cpu::philox_blocks_wide((first_index + i) >> 2, key, words);
    } else {
      cpu::philox_blocks((first_index + i) >> 2, key, words);
    }
    for (uint64_t e = 0; e < chunk; ++e) mask[i + e] = (words[e] >> 8) >= threshold;
    for (uint64_t e = 0; e < chunk; ++e) y[i + e] = x[i + e] * (float(mask[i + e]) * keep_scale);
    i += chunk;
  }
  scalar_until(total);
}

void CpuBackend::dropout_backward(const float* __restrict dy, const uint8_t* __restrict mask,
                                  float* __restrict dx, int64_t n, float p) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (float(mask[i]) * keep_scale);
}

double CpuBackend::softmax_xent(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t cols, float grad_scale, float* dlogits, int64_t* correct,
                                float label_smoothing) {
  if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
    throw InputError(fmt::format("label smoothing {} is outside [0, 1]", label_smoothing));
  // With smoothing eps the target is (1 - eps) onehot + eps / cols, so the row's loss is
  // (1 - eps) (lse - z[label]) + eps / cols * sum_c (lse - z[c]). eps = 0 keeps the one-hot
  // arithmetic untouched (the default job's bits).
  const bool smooth = label_smoothing > 0.0f;
  const double eps = label_smoothing, spread = eps / double(cols);
  double loss = 0;
  int64_t right = 0;
  // Each row's exponentials, kept from the sum for the gradient: the same values, so the same
  // bits, at half the calls to exp (which were a tenth of gpt-char's step with a 256-way output).
  thread_local std::vector<double> exps;
  if (exps.size() < size_t(cols)) exps.resize(size_t(cols));
  double* e = exps.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * cols;
    float* dz = dlogits + r * cols;
    int64_t arg = 0;
    float mx = z[0];
    for (int64_t c = 1; c < cols; ++c)
      if (z[c] > mx) mx = z[c], arg = c;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      e[c] = std::exp(double(z[c] - mx));
      sum += e[c];
    }
    const int32_t label = labels[r];
    if (label < 0 || label >= cols)
      throw InputError(fmt::format("label {} of row {} is outside the {} classes", label, r, cols));
    right += arg == label;
    const double inv = 1.0 / sum;
    if (!smooth) {
      loss += std::log(sum) - double(z[label] - mx);
      for (int64_t c = 0; c < cols; ++c) dz[c] = float(e[c] * inv - (c == label)) * grad_scale;
      continue;
    }
    const double lse = std::log(sum);
    double shifted_sum = 0;  // sum_c (z[c] - mx)
    for (int64_t c = 0; c < cols; ++c) shifted_sum += double(z[c] - mx);
    loss +=
        (1.0 - eps) * (lse - double(z[label] - mx)) + spread * (double(cols) * lse - shifted_sum);
    for (int64_t c = 0; c < cols; ++c) {
      const double target = (c == label ? 1.0 - eps : 0.0) + spread;
      dz[c] = float(e[c] * inv - target) * grad_scale;
    }
  }
  if (correct) *correct = right;
  return loss;
}

double CpuBackend::mse(const float* y, const float* target, int64_t rows, int64_t cols,
                       float grad_scale, float* dy) {
  double loss = 0;
  const float g = 2.0f / float(cols) * grad_scale;
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = y[r * cols + c] - target[r * cols + c];
      row += double(d) * double(d);
      if (dy) dy[r * cols + c] = d * g;
    }
    loss += row / double(cols);
  }
  return loss;
}

int64_t CpuBackend::count_correct(const float* logits, const int32_t* labels, int64_t rows,
                                  int64_t cols) {
  int64_t right = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * cols;
    int64_t arg = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (z[c] > z[arg]) arg = c;
    right += arg == labels[r];
  }
  return right;
}

void CpuBackend::im2col(const float* image, int64_t channels, int64_t height, int64_t width,
                        int64_t kernel, int64_t pad, int64_t stride, float* columns) {
  // columns: [channels * kernel * kernel, out_h * out_w]
  const int64_t out_h = (height + 2 * pad - kernel) / stride + 1;
  const int64_t out_w = (width + 2 * pad - kernel) / stride + 1;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t ky = 0; ky < kernel; ++ky)
      for (int64_t kx = 0; kx < kernel; ++kx) {
        float* dst = columns + ((c * kernel + ky) * kernel + kx) * out_h * out_w;
        for (int64_t oy = 0; oy < out_h; ++oy) {
          const int64_t iy = oy * stride - pad + ky;
          for (int64_t ox = 0; ox < out_w; ++ox) {
            const int64_t ix = ox * stride - pad + kx;
            const bool inside = iy >= 0 && iy < height && ix >= 0 && ix < width;
            dst[oy * out_w + ox] = inside ? image[(c * height + iy) * width + ix] : 0.0f;
          }
        }
      }
}

void CpuBackend::col2im(const float* columns, int64_t channels, int64_t height, int64_t width,
                        int64_t kernel, int64_t pad, int64_t stride, float* image) {
  const int64_t out_h = (height + 2 * pad - kernel) / stride + 1;
  const int64_t out_w = (width + 2 * pad - kernel) / stride + 1;
  std::memset(image, 0, sizeof(float) * size_t(channels * height * width));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t ky = 0; ky < kernel; ++ky)
      for (int64_t kx = 0; kx < kernel; ++kx) {
        const float* src = columns + ((c * kernel + ky) * kernel + kx) * out_h * out_w;
        for (int64_t oy = 0; oy < out_h; ++oy) {
          const int64_t iy = oy * stride - pad + ky;
          if (iy < 0 || iy >= height) continue;
          for (int64_t ox = 0; ox < out_w; ++ox) {
            const int64_t ix = ox * stride - pad + kx;
            if (ix >= 0 && ix < width)
              image[(c * height + iy) * width + ix] += src[oy * out_w + ox];
          }
        }
      }
}

void CpuBackend::maxpool_forward(const float* x, float* y, int32_t* argmax, int64_t planes,
                                 int64_t h, int64_t w, int64_t size) {
  const int64_t oh = h / size, ow = w / size;
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x + p * h * w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t best = (oy * size) * w + ox * size;
        for (int64_t dy = 0; dy < size; ++dy)
          for (int64_t dx = 0; dx < size; ++dx) {
            int64_t idx = (oy * size + dy) * w + ox * size + dx;
            if (in[idx] > in[best]) best = idx;
          }
        const int64_t o = (p * oh + oy) * ow + ox;
        y[o] = in[best];
        argmax[o] = int32_t(best);
      }
  }
}

void CpuBackend::maxpool_backward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                                  int64_t h, int64_t w, int64_t size) {
  const int64_t oh = h / size, ow = w / size;
  std::memset(dx, 0, sizeof(float) * size_t(planes * h * w));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < oh * ow; ++o)
      dx[p * h * w + argmax[p * oh * ow + o]] += dy[p * oh * ow + o];
}

void CpuBackend::sgd_update(float* __restrict p, const float* __restrict g, float* __restrict v,
                            int64_t n, float lr, float momentum, float weight_decay,
                            bool nesterov) {
  if (momentum == 0.0f) {
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + weight_decay * p[i]);
    return;
  }
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + weight_decay * p[i];
      const float vi = momentum * v[i] + d;
      v[i] = vi;
      p[i] -= lr * (d + momentum * vi);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float vi = momentum * v[i] + (g[i] + weight_decay * p[i]);
      v[i] = vi;
      p[i] -= lr * vi;
    }
  }
}

void CpuBackend::adam_update(float* __restrict p, const float* __restrict g, float* __restrict m,
                             float* __restrict v, int64_t n, float lr, float beta1, float beta2,
                             float eps, float weight_decay, bool decoupled, int64_t t) {
  const float c1 = 1.0f / (1.0f - std::pow(beta1, float(t)));
  const float c2 = 1.0f / (1.0f - std::pow(beta2, float(t)));
  const float l2 = decoupled ? 0.0f : weight_decay;
  const float shrink = decoupled ? 1.0f - lr * weight_decay : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * shrink - lr * (mi * c1) / (std::sqrt(vi * c2) + eps);
  }
}

bool CpuBackend::has_non_finite(const float* x, int64_t n) {
  // NaN and Inf are the values whose exponent bits are all ones; an OR-reduction over the
  // integer bits vectorises where a floating-point test would not.
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    any |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any != 0;
}

namespace cpu {
namespace {
std::atomic<bool> g_hide_bf16{false};
}  // namespace
void hide_bf16_for_tests(bool hide) {
  g_hide_bf16 = hide;
}
bool bf16_hidden_for_tests() {
  return g_hide_bf16.load();
}
}  // namespace cpu

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace loom
