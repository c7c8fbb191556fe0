// The CPU backend's ops for sequence models: token and position embeddings, layer
// normalisation, the causal softmax of attention scores and the token loss with an ignored
// label. Per-row sums accumulate in double over fixed interleaved lanes (cpu::lane_sum), so
// every result is one fixed function of the inputs.
#include <cmath>
#include <cstring>
#include <vector>

#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/tensor/cpu/vector_math.h"

namespace loom {

namespace {
// The token id a float holds, or -1 when it is not an integer in [0, vocab) (NaN included).
inline int64_t token_id(float v, int64_t vocab) {
  if (!(v >= 0.0f) || !(v < float(vocab)) || v != std::floor(v)) return -1;
  const int64_t id = int64_t(v);
  return id < vocab ? id : -1;
}
}  // namespace

int64_t CpuBackend::embedding_forward(const float* ids, const float* table, int64_t n,
                                      int64_t vocab, int64_t dim, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = token_id(ids[i], vocab);
    if (id < 0) return i;
    std::memcpy(y + i * dim, table + id * dim, size_t(dim) * sizeof(float));
  }
  return -1;
}

void CpuBackend::embedding_backward(const float* ids, const float* dy, int64_t n, int64_t vocab,
                                    int64_t dim, float* dtable) {
  std::memset(dtable, 0, size_t(vocab * dim) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = token_id(ids[i], vocab);
    if (id < 0) continue;  // forward refused it
    float* __restrict row = dtable + id * dim;
    const float* __restrict g = dy + i * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] += g[d];
  }
}

void CpuBackend::layernorm_forward(const float* x, int64_t rows, int64_t cols, float eps,
                                   const float* gamma, const float* beta, float* y, float* mean,
                                   float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    const double mu = cpu::lane_sum(cols, [xr](int64_t c) { return double(xr[c]); }) / double(cols);
    // Second pass over the centred values: no cancellation when |mean| >> std.
    const double sq = cpu::lane_sum(cols, [xr, mu](int64_t c) {
      const double d = double(xr[c]) - mu;
      return d * d;
    });
    const float m = float(mu);
    const float rs = float(1.0 / std::sqrt(sq / double(cols) + double(eps)));
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
  }
}

void CpuBackend::layernorm_backward(const float* x, const float* dy, int64_t rows, int64_t cols,
                                    const float* gamma, const float* mean, const float* rstd,
                                    float* dx, float* dgamma, float* dbeta) {
  std::vector<double> dg(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
  std::vector<float> xhat(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
  float* __restrict xh = xhat.data();
  float* __restrict gg = g.data();
  double* __restrict dgs = dg.data();
  double* __restrict dbs = db.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    const float* __restrict gr = dy + r * cols;
    const float m = mean[r], rs = rstd[r];
    for (int64_t c = 0; c < cols; ++c) {
      xh[c] = (xr[c] - m) * rs;
      gg[c] = gr[c] * gamma[c];
      dgs[c] += double(gr[c]) * double(xh[c]);
      dbs[c] += double(gr[c]);
    }
    if (!dx) continue;
    // The sums of g = dy gamma and of g xhat, each product formed in double.
    const double sum_g =
        cpu::lane_sum(cols, [gr, gamma](int64_t c) { return double(gr[c]) * double(gamma[c]); });
    const double sum_gx = cpu::lane_sum(cols, [gr, gamma, xh](int64_t c) {
      return double(gr[c]) * double(gamma[c]) * double(xh[c]);
    });
    const float mean_g = float(sum_g / double(cols)), mean_gx = float(sum_gx / double(cols));
    float* __restrict dr = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) dr[c] = rs * ((gg[c] - mean_g) - xh[c] * mean_gx);
  }
  for (int64_t c = 0; c < cols; ++c) {
    dgamma[c] = float(dgs[c]);
    dbeta[c] = float(dbs[c]);
  }
}

namespace {

// Row r of x (rows of t entries) softmaxed over its entries 0..last(r), the rest zero.
// x and y may be the same buffer (attention softmaxes its scores in place), as may dy and dx
// below: every loop reads an element before it writes the same one.
template <typename Last>
void softmax_rows(const float* x, float* y, int64_t rows, int64_t t, Last last) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = last(r) + 1;
    const float* xr = x + r * t;
    float* yr = y + r * t;
    float mx = xr[0];
    for (int64_t j = 1; j < n; ++j) mx = xr[j] > mx ? xr[j] : mx;
    // The exponentials in float (vectorised, one pass), their sum in double.
    for (int64_t j = 0; j < n; ++j) yr[j] = cpu::exp_approx(xr[j] - mx);
    const float inv = float(1.0 / cpu::lane_sum(n, [yr](int64_t j) { return double(yr[j]); }));
    for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    for (int64_t j = n; j < t; ++j) yr[j] = 0.0f;
  }
}

template <typename Last>
void softmax_rows_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t t,
                           Last last) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = last(r) + 1;
    const float* yr = y + r * t;
    const float* gr = dy + r * t;
    float* dr = dx + r * t;
    const float dot =
        float(cpu::lane_sum(n, [yr, gr](int64_t j) { return double(yr[j]) * double(gr[j]); }));
    for (int64_t j = 0; j < n; ++j) dr[j] = yr[j] * (gr[j] - dot);
    for (int64_t j = n; j < t; ++j) dr[j] = 0.0f;
  }
}

}  // namespace

void CpuBackend::causal_softmax_forward(const float* x, float* y, int64_t blocks, int64_t t) {
  // Row i of a block sees entries 0..i.
  softmax_rows(x, y, blocks * t, t, [t](int64_t r) { return r % t; });
}

void CpuBackend::causal_softmax_backward(const float* y, const float* dy, float* dx, int64_t blocks,
                                         int64_t t) {
  softmax_rows_backward(y, dy, dx, blocks * t, t, [t](int64_t r) { return r % t; });
}

void CpuBackend::softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
  softmax_rows(x, y, rows, cols, [cols](int64_t) { return cols - 1; });
}

void CpuBackend::softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                  int64_t cols) {
  softmax_rows_backward(y, dy, dx, rows, cols, [cols](int64_t) { return cols - 1; });
}

double CpuBackend::softmax_xent_ignore(const float* logits, const int32_t* labels, int64_t rows,
                                       int64_t cols, float grad_scale, float* dlogits,
                                       int64_t* correct, float label_smoothing,
                                       int32_t ignore_index, int64_t* counted) {
  // Runs of counted rows go through softmax_xent itself, so they get its bits exactly.
  double loss = 0;
  int64_t right = 0, n = 0;
  int64_t r = 0;
  while (r < rows) {
    if (labels[r] == ignore_index) {
      std::memset(dlogits + r * cols, 0, size_t(cols) * sizeof(float));
      ++r;
      continue;
    }
    int64_t end = r;
    while (end < rows && labels[end] != ignore_index) ++end;
    int64_t c = 0;
    try {
      loss += softmax_xent(logits + r * cols, labels + r, end - r, cols, grad_scale,
                           dlogits + r * cols, &c, label_smoothing);
    } catch (const InputError&) {
      for (int64_t k = r; k < end; ++k)
        if (labels[k] < 0 || labels[k] >= cols)
          throw InputError(
              fmt::format("label {} of row {} is outside the {} classes (and is not "
                          "the ignored label {})",
                          labels[k], k, cols, ignore_index));
      throw;
    }
    right += c;
    n += end - r;
    r = end;
  }
  if (correct) *correct = right;
  if (counted) *counted = n;
  return loss;
}

}  // namespace loom
