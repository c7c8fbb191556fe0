#include "loom/tensor/cpu/depthwise_weight_grad.h"

#include <algorithm>

namespace loom::cpu {

void depthwise_weight_grad(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                           float* dbias) {
  const int64_t channels = g.out_c, in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t taps = g.kernel_h * g.kernel_w;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < channels; ++c) {
    float* dwc = dw + c * taps;
    std::fill(dwc, dwc + taps, 0.0f);
    float bias_sum = 0.0f;
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* xp = x + (n * channels + c) * in_plane;
      const float* dyp = dy + (n * channels + c) * out_plane;
      if (dbias)
        for (int64_t i = 0; i < out_plane; ++i) bias_sum += dyp[i];
      for (int64_t kh = 0; kh < g.kernel_h; ++kh)
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          float sum = 0.0f;
          for (int64_t oh = 0; oh < g.out_h; ++oh) {
            const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
            if (ih < 0 || ih >= g.in_h) continue;
            for (int64_t ow = 0; ow < g.out_w; ++ow) {
              const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
              if (iw >= 0 && iw < g.in_w) sum += dyp[oh * g.out_w + ow] * xp[ih * g.in_w + iw];
            }
          }
          dwc[kh * g.kernel_w + kw] += sum;
        }
    }
    if (dbias) dbias[c] = bias_sum;
  }
}

}  // namespace loom::cpu
