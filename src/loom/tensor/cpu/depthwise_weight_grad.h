// The weight (and bias) gradient of a depthwise convolution (groups = in_c = out_c) on NCHW
// tensors, written by hand for the geometries where oneDNN has no direct kernel: its depthwise
// backward-weights kernel declines maps smaller than the kernel (MobileNetV2's last 3 x 3
// depthwise layers on 2 x 2 maps), and its fallback runs one im2col GEMM per channel, about 30
// times slower than this loop there.
#pragma once

#include "loom/tensor/backend.h"

namespace loom::cpu {

// dw[c, 0, kh, kw] = sum over n, oh, ow of dy[n, c, oh, ow] * x[n, c, ih, iw] at the input
// position the tap reads (zero outside the map); dbias[c] (if not null) = sum of dy[n, c].
// Overwrites dw and dbias. Parallel over channels.
void depthwise_weight_grad(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                           float* dbias);

}  // namespace loom::cpu
