// Gradient codecs on the device, byte for byte the packed formats of the CPU reference codecs in
// compress/ (fp16_codec.h, bf16_codec.h, onebit_codec.h, int8_codec.h, topk_codec.h), with the
// same error-feedback contract:
//   s = g + r;  out = Q(s);  r = s - D(Q(s))
// (a caller without error feedback zeroes r first, as Codec::encode does). Every pointer is
// device memory; every call queues on `stream`. Encoders set *bad (a device int the caller
// zeroes) to 1 if any s is NaN or Inf; the bytes are then unspecified, as the CPU codec throws.
// The layouts are pinned by static_asserts in codec_kernels.cu and by tests/tensor_cuda's
// comparison with the CPU codecs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

// fp16 / bf16: n 2-byte values, zero-padded to a multiple of 4 bytes.
int64_t half_encoded_bytes(int64_t n);
void fp16_encode(cudaStream_t s, const float* g, float* r, int64_t n, uint16_t* out, int* bad);
void fp16_decode(cudaStream_t s, const uint16_t* in, int64_t n, float* out, bool accumulate);
void bf16_encode(cudaStream_t s, const float* g, float* r, int64_t n, uint16_t* out, int* bad);
void bf16_decode(cudaStream_t s, const uint16_t* in, int64_t n, float* out, bool accumulate);

// 1-bit with per-column means (Seide et al. 2014): {float neg, pos} per column of `column`
// elements (a multiple of 32), then ceil(n / 32) sign words.
int64_t onebit_encoded_bytes(int64_t n, int64_t column);
void onebit_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t column, void* out,
                   int* bad);
void onebit_decode(cudaStream_t s, const void* in, int64_t n, int64_t column, float* out,
                   bool accumulate);

// int8 dynamic tree (Dettmers 2016): float absmax[ceil(n / block)], uint8 code[n], zero pad to
// a multiple of 4 bytes; block a power of two >= 8 (codec_int8.cu).
int64_t int8_encoded_bytes(int64_t n, int64_t block);
void int8_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t block, void* out,
                 int* bad);
void int8_decode(cudaStream_t s, const void* in, int64_t n, int64_t block, float* out,
                 bool accumulate);

// top-k: k entries {uint32 index, float value} sorted by index, the k largest |s| with ties to
// the lower index; their residuals become 0 (codec_topk.cu). k = compress::topk_count(n, f),
// 1 <= k <= n < 2^32. `workspace`: topk_workspace_bytes(n) of device memory, not shared by
// concurrent calls. Decode ignores indices >= n (the CPU codec throws on them).
int64_t topk_workspace_bytes(int64_t n);
void topk_encode(cudaStream_t s, const float* g, float* r, int64_t n, int64_t k, void* out,
                 void* workspace, int* bad);
void topk_decode(cudaStream_t s, const void* in, int64_t k, int64_t n, float* out, bool accumulate);

}  // namespace loom::cuda
