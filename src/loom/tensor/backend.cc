// Default implementations of the Backend ops that a backend need not provide: what the older
// ops already compute (ReLU, the CNN's square convolution and 2x2 pooling) runs through them,
// so a backend without the newer kernels still trains the zoo's models; anything else is a
// clear error naming the op and the backend. (The CPU and CUDA backends override them all.)
#include "loom/tensor/backend.h"

#include "loom/core/error.h"

namespace loom {
namespace {

[[noreturn]] void unavailable(const Backend& be, const std::string& op) {
  throw Error(fmt::format("{} is not available on the {} backend", op, be.name()));
}

// The geometry the im2col/col2im ops take: one square kernel, stride and padding per image.
bool im2col_geometry(const ConvGeometry& g) {
  return g.kernel_h == g.kernel_w && g.stride_h == g.stride_w && g.pad_h == g.pad_w &&
         g.dilation_h == 1 && g.dilation_w == 1 && g.groups == 1;
}

// Scratch memory of the backend, freed on scope exit.
struct Scratch {
  Scratch(Backend& be, int64_t n)
      : backend(be), data(static_cast<float*>(be.allocate(size_t(n) * sizeof(float)))) {}
  ~Scratch() { backend.deallocate(data); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Backend& backend;
  float* data;
};

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

std::string Backend::matmul_precision_unsupported(Precision p) const {
  if (p == Precision::kFp32) return "";
  return fmt::format("the {} backend runs fp32 matrix products only", name());
}

void Backend::note_non_finite(const float* x, int64_t n, float* flag) {
  if (has_non_finite(x, n)) fill(flag, 1, 1.0f);
}

void Backend::set_matmul_precision(Precision p) {
  const std::string why = matmul_precision_unsupported(p);
  if (!why.empty())
    throw ConfigError(fmt::format("{} matrix products: {}", precision_name(p), why));
  matmul_precision_.store(p, std::memory_order_relaxed);
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "ReLU";
    case Activation::kLeakyRelu:
      return "LeakyReLU";
    case Activation::kGelu:
      return "GELU";
    case Activation::kSilu:
      return "SiLU";
    case Activation::kTanh:
      return "Tanh";
    case Activation::kSigmoid:
      return "Sigmoid";
    case Activation::kRelu6:
      return "ReLU6";
    case Activation::kHardSigmoid:
      return "Hardsigmoid";
    case Activation::kHardSwish:
      return "Hardswish";
  }
  return "?";
}

void Backend::activation_forward(Activation kind, float alpha, const float* x, float* y,
                                 int64_t n) {
  (void)alpha;
  if (kind != Activation::kRelu)
    unavailable(*this, fmt::format("activation_forward({})", activation_name(kind)));
  relu_forward(x, y, n);
}

void Backend::activation_backward(Activation kind, float alpha, const float* x, const float* y,
                                  const float* dy, float* dx, int64_t n) {
  (void)alpha;
  (void)x;
  if (kind != Activation::kRelu)
    unavailable(*this, fmt::format("activation_backward({})", activation_name(kind)));
  relu_backward(y, dy, dx, n);
}

double Backend::mse(const float*, const float*, int64_t, int64_t, float, float*) {
  unavailable(*this, "mse");
}

void Backend::conv2d_forward(const ConvGeometry& g, const float* x, const float* w,
                             const float* bias, float* y) {
  if (!im2col_geometry(g)) unavailable(*this, "conv2d_forward (this geometry)");
  const int64_t rows = g.in_c * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  Scratch columns(*this, rows * cols);
  for (int64_t n = 0; n < g.batch; ++n) {
    im2col(x + n * g.in_c * g.in_h * g.in_w, g.in_c, g.in_h, g.in_w, g.kernel_h, g.pad_h,
           g.stride_h, columns.data);
    float* out = y + n * g.out_c * cols;
    gemm(false, false, g.out_c, cols, rows, 1.0f, w, rows, columns.data, cols, 0.0f, out, cols);
    if (bias) add_channel_bias(out, bias, g.out_c, cols);
  }
}

void Backend::conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                                   float* dx) {
  if (!im2col_geometry(g)) unavailable(*this, "conv2d_backward_data (this geometry)");
  const int64_t rows = g.in_c * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  Scratch columns(*this, rows * cols);
  for (int64_t n = 0; n < g.batch; ++n) {
    // dcolumns = W^T [rows, out_c] x dout [out_c, cols], then scattered back to the image.
    gemm(true, false, rows, cols, g.out_c, 1.0f, w, rows, dy + n * g.out_c * cols, cols, 0.0f,
         columns.data, cols);
    col2im(columns.data, g.in_c, g.in_h, g.in_w, g.kernel_h, g.pad_h, g.stride_h,
           dx + n * g.in_c * g.in_h * g.in_w);
  }
}

void Backend::conv2d_backward_weights(const ConvGeometry& g, const float* x, const float* dy,
                                      float* dw, float* dbias) {
  if (!im2col_geometry(g)) unavailable(*this, "conv2d_backward_weights (this geometry)");
  const int64_t rows = g.in_c * g.kernel_h * g.kernel_w, cols = g.out_h * g.out_w;
  Scratch columns(*this, rows * cols);
  if (dbias) fill(dbias, g.out_c, 0.0f);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* dout = dy + n * g.out_c * cols;
    im2col(x + n * g.in_c * g.in_h * g.in_w, g.in_c, g.in_h, g.in_w, g.kernel_h, g.pad_h,
           g.stride_h, columns.data);
    // dW (+)= dout [out_c, cols] x columns^T [cols, rows]
    gemm(false, true, g.out_c, rows, cols, 1.0f, dout, cols, columns.data, cols,
         n == 0 ? 0.0f : 1.0f, dw, rows);
    if (dbias) accumulate_channel_sums(dout, dbias, g.out_c, cols);
  }
}

void Backend::conv2d_backward(const ConvGeometry& g, const float* x, const float* w,
                              const float* dy, float* dx, float* dw, float* dbias) {
  conv2d_backward_weights(g, x, dy, dw, dbias);
  if (dx) conv2d_backward_data(g, w, dy, dx);
}

namespace {
// The geometry maxpool_forward takes: window = stride, no padding, floor mode.
bool tiled_pool(const PoolGeometry& g) {
  return g.kernel_h == g.kernel_w && g.stride_h == g.kernel_h && g.stride_w == g.kernel_w &&
         g.pad_h == 0 && g.pad_w == 0 && g.out_h == g.in_h / g.kernel_h &&
         g.out_w == g.in_w / g.kernel_w;
}
}  // namespace

void Backend::maxpool2d_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax) {
  if (!tiled_pool(g)) unavailable(*this, "maxpool2d_forward (this geometry)");
  maxpool_forward(x, y, argmax, g.planes, g.in_h, g.in_w, g.kernel_h);
}

void Backend::maxpool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax,
                                 float* dx) {
  if (!tiled_pool(g)) unavailable(*this, "maxpool2d_backward (this geometry)");
  maxpool_backward(dy, argmax, dx, g.planes, g.in_h, g.in_w, g.kernel_h);
}

void Backend::avgpool2d_forward(const PoolGeometry&, bool, const float*, float*) {
  unavailable(*this, "avgpool2d_forward");
}
void Backend::avgpool2d_backward(const PoolGeometry&, bool, const float*, float*) {
  unavailable(*this, "avgpool2d_backward");
}
void Backend::channel_moments(const float*, int64_t, int64_t, int64_t, const float*, float*,
                              float*) {
  unavailable(*this, "channel_moments");
}
void Backend::batchnorm_forward(const float*, int64_t, int64_t, int64_t, const float*, const float*,
                                float, const float*, const float*, float*) {
  unavailable(*this, "batchnorm_forward");
}
void Backend::batchnorm_backward_reduce(const float*, const float*, int64_t, int64_t, int64_t,
                                        const float*, const float*, float, float*, float*) {
  unavailable(*this, "batchnorm_backward_reduce");
}
void Backend::batchnorm_backward_data(const float*, const float*, int64_t, int64_t, int64_t,
                                      const float*, const float*, float, const float*, const float*,
                                      const float*, double, float*) {
  unavailable(*this, "batchnorm_backward_data");
}

void Backend::batchnorm_forward_training(const float* x, int64_t batch, int64_t channels,
                                         int64_t plane, float inv_count, float eps,
                                         const float* gamma, const float* beta, float* mean,
                                         float* var, float* sumsq, float* y) {
  channel_moments(x, batch, channels, plane, nullptr, mean, nullptr);
  scale(channels, inv_count, mean);
  channel_moments(x, batch, channels, plane, mean, nullptr, sumsq);
  copy(var, sumsq, size_t(channels) * sizeof(float));
  scale(channels, inv_count, var);
  batchnorm_forward(x, batch, channels, plane, mean, var, eps, gamma, beta, y);
}

void Backend::batchnorm_backward(const float* x, const float* dy, int64_t batch, int64_t channels,
                                 int64_t plane, const float* mean, const float* var, float eps,
                                 const float* gamma, double count, float* sum_dy,
                                 float* sum_dy_xhat, float* dx) {
  batchnorm_backward_reduce(x, dy, batch, channels, plane, mean, var, eps, sum_dy, sum_dy_xhat);
  batchnorm_backward_data(x, dy, batch, channels, plane, mean, var, eps, gamma, sum_dy, sum_dy_xhat,
                          count, dx);
}

int64_t Backend::embedding_forward(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  unavailable(*this, "embedding_forward");
}
void Backend::embedding_backward(const float*, const float*, int64_t, int64_t, int64_t, float*) {
  unavailable(*this, "embedding_backward");
}
void Backend::layernorm_forward(const float*, int64_t, int64_t, float, const float*, const float*,
                                float*, float*, float*) {
  unavailable(*this, "layernorm_forward");
}
void Backend::layernorm_backward(const float*, const float*, int64_t, int64_t, const float*,
                                 const float*, const float*, float*, float*, float*) {
  unavailable(*this, "layernorm_backward");
}
void Backend::gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, int64_t stride_a, const float* b,
                           int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                           int64_t stride_c, int64_t batch) {
  for (int64_t i = 0; i < batch; ++i)
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
}
void Backend::softmax_forward(const float*, float*, int64_t, int64_t) {
  unavailable(*this, "softmax_forward");
}
void Backend::softmax_backward(const float*, const float*, float*, int64_t, int64_t) {
  unavailable(*this, "softmax_backward");
}
void Backend::permute(const float*, float*, int64_t, const Permutation&) {
  unavailable(*this, "permute");
}
void Backend::scale_rows(const float*, const float*, float*, int64_t, int64_t) {
  unavailable(*this, "scale_rows");
}
void Backend::row_dots(const float*, const float*, float*, int64_t, int64_t) {
  unavailable(*this, "row_dots");
}

void Backend::causal_softmax_forward(const float*, float*, int64_t, int64_t) {
  unavailable(*this, "causal_softmax_forward");
}
void Backend::causal_softmax_backward(const float*, const float*, float*, int64_t, int64_t) {
  unavailable(*this, "causal_softmax_backward");
}
double Backend::softmax_xent_ignore(const float*, const int32_t*, int64_t, int64_t, float, float*,
                                    int64_t*, float, int32_t, int64_t*) {
  unavailable(*this, "softmax_xent_ignore");
}

}  // namespace loom
