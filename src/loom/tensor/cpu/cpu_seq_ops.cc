// The CPU backend's ops for sequence models: token and position embeddings, layer
// normalisation, the causal softmax of attention scores and the token loss with an ignored
// label. Per-row sums accumulate in double; the loops run in index order, so every result is
// one fixed function of the inputs.
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
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += double(xr[c]);
    const double mu = sum / double(cols);
    // Second pass over the centred values: no cancellation when |mean| >> std.
    double sq = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double(xr[c]) - mu;
      sq += d * d;
    }
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
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    const float* __restrict gr = dy + r * cols;
    const float m = mean[r], rs = rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * rs;
      const double g = double(gr[c]) * double(gamma[c]);
      sum_g += g;
      sum_gx += g * double(xhat);
      dg[size_t(c)] += double(gr[c]) * double(xhat);
      db[size_t(c)] += double(gr[c]);
    }
    if (!dx) continue;
    const double mean_g = sum_g / double(cols), mean_gx = sum_gx / double(cols);
    float* __restrict dr = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = double((xr[c] - m) * rs);
      const double g = double(gr[c]) * double(gamma[c]);
      dr[c] = float(double(rs) * (g - mean_g - xhat * mean_gx));
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dgamma[c] = float(dg[size_t(c)]);
    dbeta[c] = float(db[size_t(c)]);
  }
}

namespace {

// Row r of x (rows of t entries) softmaxed over its entries 0..last(r), the rest zero.
template <typename Last>
void softmax_rows(const float* x, float* y, int64_t rows, int64_t t, Last last) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = last(r);
    const float* xr = x + r * t;
    float* yr = y + r * t;
    float mx = xr[0];
    for (int64_t j = 1; j <= i; ++j) mx = xr[j] > mx ? xr[j] : mx;
    // The exponentials in float (vectorised, one pass), their sum in double.
    for (int64_t j = 0; j <= i; ++j) yr[j] = cpu::exp_approx(xr[j] - mx);
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += double(yr[j]);
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j <= i; ++j) yr[j] = float(double(yr[j]) * inv);
    for (int64_t j = i + 1; j < t; ++j) yr[j] = 0.0f;
  }
}

template <typename Last>
void softmax_rows_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t t,
                           Last last) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = last(r);
    const float* yr = y + r * t;
    const float* gr = dy + r * t;
    float* dr = dx + r * t;
    double dot = 0;
    for (int64_t j = 0; j <= i; ++j) dot += double(yr[j]) * double(gr[j]);
    for (int64_t j = 0; j <= i; ++j) dr[j] = float(double(yr[j]) * (double(gr[j]) - dot));
    for (int64_t j = i + 1; j < t; ++j) dr[j] = 0.0f;
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
