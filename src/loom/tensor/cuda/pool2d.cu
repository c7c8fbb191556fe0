// Max and average pooling with rectangular windows, stride, padding and ceil mode (the output
// size comes from the caller), PyTorch's semantics as the CPU backend computes them
// (cpu_layer_ops.cc): the same window clipping, the same first-maximum rule (a NaN wins), the
// same divisor, and sums in the same order, so values and argmax indices are bit-identical to
// the CPU's. The backward passes gather: each input pixel adds the shares of the windows that
// hold it in output order, which is the order the CPU's scatter adds them in.
#include "loom/tensor/cuda/kernels.h"
#include "loom/tensor/cuda/launch.cuh"

namespace loom::cuda {

namespace {

// Output position o's input rows or columns [begin, end), clipped to the input, and the
// window's extent clipped to the padded input (the count_include_pad divisor).
struct Span {
  int64_t begin, end, padded;
};
__device__ inline Span window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in) {
  const int64_t start = o * stride - pad;
  const int64_t stop = min(start + kernel, in + pad);
  return {max(start, int64_t(0)), min(stop, in), stop - start};
}

// The outputs [first, last] whose windows hold input i (none when first > last).
__device__ inline void outputs_of(int64_t i, int64_t stride, int64_t pad, int64_t kernel,
                                  int64_t out, int64_t& first, int64_t& last) {
  const int64_t t = i + pad - kernel + 1;  // o stride > t - 1, i.e. o stride - pad + kernel > i
  first = t <= 0 ? 0 : (t + stride - 1) / stride;
  last = min((i + pad) / stride, out - 1);
}

__device__ inline int64_t divisor(const Span& sy, const Span& sx, bool count_include_pad) {
  return count_include_pad ? sy.padded * sx.padded : (sy.end - sy.begin) * (sx.end - sx.begin);
}

}  // namespace

void maxpool2d_forward(cudaStream_t s, const PoolDims& g, const float* x, float* y,
                       int32_t* argmax) {
  const PoolDims d = g;
  const int64_t out_plane = g.out_h * g.out_w;
  launch_1d(s, g.planes * out_plane, [=] __device__(int64_t o) {
    const int64_t p = o / out_plane, pos = o - p * out_plane;
    const int64_t oy = pos / d.out_w, ox = pos - oy * d.out_w;
    const Span sy = window(oy, d.stride_h, d.pad_h, d.kernel_h, d.in_h);
    const Span sx = window(ox, d.stride_w, d.pad_w, d.kernel_w, d.in_w);
    const float* in = x + p * d.in_h * d.in_w;
    int64_t best = sy.begin * d.in_w + sx.begin;
    float mx = -__int_as_float(0x7f800000);  // -inf
    for (int64_t iy = sy.begin; iy < sy.end; ++iy)
      for (int64_t ix = sx.begin; ix < sx.end; ++ix) {
        const float v = in[iy * d.in_w + ix];
        if (v > mx || v != v) {
          mx = v;
          best = iy * d.in_w + ix;
        }
      }
    y[o] = mx;
    argmax[o] = int32_t(best);
  });
}

void maxpool2d_backward(cudaStream_t s, const PoolDims& g, const float* dy, const int32_t* argmax,
                        float* dx) {
  const PoolDims d = g;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  launch_1d(s, g.planes * in_plane, [=] __device__(int64_t i) {
    const int64_t p = i / in_plane, pos = i - p * in_plane;
    const int64_t iy = pos / d.in_w, ix = pos - iy * d.in_w;
    int64_t y0, y1, x0, x1;
    outputs_of(iy, d.stride_h, d.pad_h, d.kernel_h, d.out_h, y0, y1);
    outputs_of(ix, d.stride_w, d.pad_w, d.kernel_w, d.out_w, x0, x1);
    const int64_t base = p * out_plane;
    float acc = 0.0f;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox) {
        const int64_t o = base + oy * d.out_w + ox;
        if (argmax[o] == pos) acc += dy[o];
      }
    dx[i] = acc;
  });
}

void avgpool2d_forward(cudaStream_t s, const PoolDims& g, bool count_include_pad, const float* x,
                       float* y) {
  const PoolDims d = g;
  const int64_t out_plane = g.out_h * g.out_w;
  launch_1d(s, g.planes * out_plane, [=] __device__(int64_t o) {
    const int64_t p = o / out_plane, pos = o - p * out_plane;
    const int64_t oy = pos / d.out_w, ox = pos - oy * d.out_w;
    const Span sy = window(oy, d.stride_h, d.pad_h, d.kernel_h, d.in_h);
    const Span sx = window(ox, d.stride_w, d.pad_w, d.kernel_w, d.in_w);
    const float* in = x + p * d.in_h * d.in_w;
    float acc = 0.0f;
    for (int64_t iy = sy.begin; iy < sy.end; ++iy)
      for (int64_t ix = sx.begin; ix < sx.end; ++ix) acc += in[iy * d.in_w + ix];
    y[o] = acc / float(divisor(sy, sx, count_include_pad));
  });
}

void avgpool2d_backward(cudaStream_t s, const PoolDims& g, bool count_include_pad, const float* dy,
                        float* dx) {
  const PoolDims d = g;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  launch_1d(s, g.planes * in_plane, [=] __device__(int64_t i) {
    const int64_t p = i / in_plane, pos = i - p * in_plane;
    const int64_t iy = pos / d.in_w, ix = pos - iy * d.in_w;
    int64_t y0, y1, x0, x1;
    outputs_of(iy, d.stride_h, d.pad_h, d.kernel_h, d.out_h, y0, y1);
    outputs_of(ix, d.stride_w, d.pad_w, d.kernel_w, d.out_w, x0, x1);
    const float* grad = dy + p * out_plane;
    float acc = 0.0f;
    for (int64_t oy = y0; oy <= y1; ++oy) {
      const Span sy = window(oy, d.stride_h, d.pad_h, d.kernel_h, d.in_h);
      for (int64_t ox = x0; ox <= x1; ++ox) {
        const Span sx = window(ox, d.stride_w, d.pad_w, d.kernel_w, d.in_w);
        acc += grad[oy * d.out_w + ox] / float(divisor(sy, sx, count_include_pad));
      }
    }
    dx[i] = acc;
  });
}

}  // namespace loom::cuda
