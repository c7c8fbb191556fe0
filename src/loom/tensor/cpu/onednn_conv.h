// Convolution through oneDNN's convolution primitives (forward, backward data, backward
// weights), created once per (geometry, bias, thread count) and cached per thread, as
// onednn_matmul does for GEMM. Every tensor goes to and from the blocked layout the primitive
// picks (nChw16c on AVX-512) by a reorder on each call: with loom's plain NCHW layout oneDNN
// would run its im2col + GEMM implementation, no faster than loom's own; the direct JIT kernels
// are, and the reorders cost ~10% of them.
#pragma once

#include <cstdint>

#include "loom/tensor/backend.h"

namespace loom::cpu {

// With Precision::kBf16 the primitives read x, w and dy as bf16 (the reorders into their layout
// round to nearest even) and write y, dx, dw and dbias in fp32 (fp32 accumulation). Each
// precision has its own cached primitives.
void onednn_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, Precision precision = Precision::kFp32);
// onednn_conv_forward, keeping x in the primitive's layout for the next onednn_conv_backward
// on the same x pointer (which uses it once; x must not change in between).
void onednn_conv_forward_training(const ConvGeometry& g, const float* x, const float* w,
                                  const float* bias, float* y,
                                  Precision precision = Precision::kFp32);
void onednn_conv_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                               Precision precision = Precision::kFp32);
void onednn_conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                                  float* dbias, Precision precision = Precision::kFp32);
// Both backward passes (dx when not null), with dy brought into the blocked layout once.
void onednn_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                          float* dx, float* dw, float* dbias,
                          Precision precision = Precision::kFp32);

// Geometries cached on the calling thread (for tests of the cache).
int64_t onednn_conv_cached_geometries();

}  // namespace loom::cpu
