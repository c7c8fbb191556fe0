#include "loom/comm/sum_to_all.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "loom/comm/scratch.h"

namespace loom::comm {

namespace {

// Scalar form of the kernel, for the unaligned head and the tail of a range (and for builds
// without AVX). The same left-to-right order as the vector loop, so the bits agree.
void sum_scalar(const float* const* src, int n, float* const* dst, int m, size_t begin,
                size_t end) {
  for (size_t i = begin; i < end; ++i) {
    float s = src[0][i];
    for (int q = 1; q < n; ++q) s += src[q][i];
    for (int d = 0; d < m; ++d) dst[d][i] = s;
  }
}

}  // namespace

void sum_to_all_f32(const float* const* src, int n, float* const* dst, int m, size_t begin,
                    size_t end) {
  if (begin >= end) return;
#if defined(__AVX__)
  // Peel to a 32-byte boundary of the first source: the buffers of one process usually share
  // their alignment, so the vector loop then never splits a cache line.
  size_t i = begin;
  const size_t misalign = (reinterpret_cast<uintptr_t>(src[0] + i) & 31) / sizeof(float);
  const size_t head = misalign == 0 ? 0 : (32 / sizeof(float) - misalign);
  if (head > 0) {
    const size_t stop = i + head < end ? i + head : end;
    sum_scalar(src, n, dst, m, i, stop);
    i = stop;
  }
  // 32 floats (4 AVX registers, two cache lines) per iteration: enough independent adds to
  // hide their latency, few enough registers for any n.
  for (; i + 32 <= end; i += 32) {
    __m256 s0 = _mm256_loadu_ps(src[0] + i);
    __m256 s1 = _mm256_loadu_ps(src[0] + i + 8);
    __m256 s2 = _mm256_loadu_ps(src[0] + i + 16);
    __m256 s3 = _mm256_loadu_ps(src[0] + i + 24);
    for (int q = 1; q < n; ++q) {
      const float* p = src[q] + i;
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + 8));
      s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + 16));
      s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + 24));
    }
    for (int d = 0; d < m; ++d) {
      float* p = dst[d] + i;
      _mm256_storeu_ps(p, s0);
      _mm256_storeu_ps(p + 8, s1);
      _mm256_storeu_ps(p + 16, s2);
      _mm256_storeu_ps(p + 24, s3);
    }
  }
  sum_scalar(src, n, dst, m, i, end);
#else
  sum_scalar(src, n, dst, m, begin, end);
#endif
}

void reduce_to_all(const std::byte* const* src, int n, std::byte* const* dst, int m, size_t begin,
                   size_t end, const Reducer& red) {
  const size_t es = red.elem_size;
  const size_t tile = std::max<size_t>(1, (size_t(8) << 10) / es);
  std::byte* acc = static_cast<std::byte*>(scratch(tile * es, 0));
  for (size_t i = begin; i < end; i += tile) {
    const size_t cnt = std::min(tile, end - i);
    std::memcpy(acc, src[0] + i * es, cnt * es);
    for (int q = 1; q < n; ++q) red.fn(acc, src[q] + i * es, cnt);
    for (int d = 0; d < m; ++d) std::memcpy(dst[d] + i * es, acc, cnt * es);
  }
}

}  // namespace loom::comm
