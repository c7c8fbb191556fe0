#include "loom/tensor/cpu/onednn_matmul.h"

#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>

#include "loom/core/cpu_features.h"
#include "loom/core/error.h"

namespace loom::cpu {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

// Everything a primitive is specialised for. alpha and beta are baked in as an output scale and
// a sum post-op: the training step only ever uses (1, 0), so runtime scales would buy nothing.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float,
                       float, int, Precision>;

// A bf16 copy of an fp32 operand: the reorder rounds to nearest even.
struct Rounded {
  dnnl::memory half;
  dnnl::reorder to_half;
};

struct Entry {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;             // loom's fp32 buffers
  std::optional<Rounded> a16, b16;  // with bf16: what the primitive reads
};

// Shapes seen by one thread: the step's GEMMs, the evaluation batches and a last short batch.
// A run that keeps changing shapes (it should not) is bounded by starting over.
constexpr size_t kMaxCachedPrimitives = 256;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

struct ThreadCache {
  dnnl::stream stream{cpu_engine()};
  std::map<Key, Entry> entries;
  // Where offset_b copies B (see there), and its size in floats.
  std::unique_ptr<float, FreeDeleter> b_copy;
  size_t b_copy_floats = 0;
};

ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

// Row-major [rows, cols] stored transposed or not, with leading dimension ld.
dnnl::memory::desc matrix(int64_t rows, int64_t cols, bool transposed, int64_t ld,
                          dt type = dt::f32) {
  return dnnl::memory::desc(dims{rows, cols}, type, transposed ? dims{1, ld} : dims{ld, 1});
}

// The operand `user` rounded into a dense bf16 matrix of the same orientation.
Rounded rounded(const dnnl::memory& user, int64_t rows, int64_t cols, bool transposed) {
  const auto md = matrix(rows, cols, transposed, transposed ? rows : cols, dt::bf16);
  dnnl::memory half(md, user.get_engine());
  return Rounded{half, dnnl::reorder(user, half)};
}

Entry make_entry(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 int64_t lda, int64_t ldb, float beta, int64_t ldc, Precision precision) {
  LOOM_CHECK(precision == Precision::kFp32 || precision == Precision::kBf16,
             "the oneDNN matmul runs fp32 or bf16, not {}", precision_name(precision));
  const auto a_md = matrix(m, k, trans_a, lda);
  const auto b_md = matrix(k, n, trans_b, ldb);
  const auto c_md = matrix(m, n, false, ldc);
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  dnnl::engine& engine = cpu_engine();
  Entry e;
  e.a = dnnl::memory(a_md, engine, DNNL_MEMORY_NONE);
  e.b = dnnl::memory(b_md, engine, DNNL_MEMORY_NONE);
  e.c = dnnl::memory(c_md, engine, DNNL_MEMORY_NONE);
  if (precision == Precision::kBf16) {
    e.a16 = rounded(e.a, m, k, trans_a);
    e.b16 = rounded(e.b, k, n, trans_b);
  }
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(e.a16 ? e.a16->half.get_desc() : a_md,
                         e.b16 ? e.b16->half.get_desc() : b_md, c_md),
      attr, engine);
  e.primitive = dnnl::matmul(pd);
  return e;
}

// The primitive's operand: the fp32 buffer itself or its bf16 rounding.
dnnl::memory& operand(dnnl::stream& s, dnnl::memory& user, std::optional<Rounded>& half) {
  if (!half) return user;
  half->to_half.execute(s, user, half->half);
  return half->half;
}

// oneDNN's f32 GEMM with its AVX2 kernels reads an untransposed B in place, without packing
// it, when B is 32-byte aligned. With a row stride that is a multiple of 4 KiB (a [1024, N]
// weight in its stored layout: the backward pass's dX = dY W), the rows of a column panel fall
// into the same cache sets and the product runs at about half speed: 128 x 1024 x 1024 took
// 6.1 ms with B 32-byte aligned and 3.4 ms with B 16 bytes off it, on an AVX2-only Zen 3
// (bench/gemm_bench.cc, BM_NnAlignment). Such a B is handed over as a copy 16 bytes off the
// alignment, which oneDNN packs; the copy (4 MiB there, ~0.3 ms) is the price. AVX-512
// kernels are not known to do this, so they get B as it is. Returns the B to use.
const float* offset_b(ThreadCache& cache, bool trans_b, int64_t n, int64_t k, const float* b,
                      int64_t ldb) {
  constexpr int64_t kMinFloats = int64_t(1) << 16;  // small products: the copy would dominate
  if (trans_b || cpu_has_avx512() || (ldb * int64_t(sizeof(float))) % 4096 != 0 ||
      reinterpret_cast<uintptr_t>(b) % 32 != 0 || k * n < kMinFloats)
    return b;
  const size_t floats = size_t((k - 1) * ldb + n);
  if (cache.b_copy_floats < floats) {
    // 16 bytes past a 64-byte boundary: never 32-byte aligned.
    const size_t bytes = ((floats + 16) * sizeof(float) + 63) / 64 * 64;
    cache.b_copy.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    LOOM_CHECK(cache.b_copy != nullptr, "out of memory for a GEMM operand of {} floats", floats);
    cache.b_copy_floats = floats;
  }
  float* copy = cache.b_copy.get() + 4;
  std::memcpy(copy, b, floats * sizeof(float));
  return copy;
}

}  // namespace

void onednn_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc, Precision precision) {
  ThreadCache& cache = thread_cache();
  const Key key{trans_a,  trans_b, m, n, k, lda, ldb, ldc, alpha, beta, omp_get_max_threads(),
                precision};
  auto it = cache.entries.find(key);
  if (it == cache.entries.end()) {
    if (cache.entries.size() >= kMaxCachedPrimitives) cache.entries.clear();
    try {
      it = cache.entries
               .emplace(key, make_entry(trans_a, trans_b, m, n, k, alpha, lda, ldb, beta, ldc,
                                        precision))
               .first;
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("oneDNN {} matmul {}x{}x{} (trans {}{}) could not be created: {}",
                              precision_name(precision), m, n, k, trans_a ? 'T' : 'N',
                              trans_b ? 'T' : 'N', e.what()));
    }
  }
  Entry& e = it->second;
  if (precision == Precision::kFp32) b = offset_b(cache, trans_b, n, k, b, ldb);
  // oneDNN takes non-const handles; the primitive only reads its sources.
  e.a.set_data_handle(const_cast<float*>(a));
  e.b.set_data_handle(const_cast<float*>(b));
  e.c.set_data_handle(c);
  e.primitive.execute(cache.stream, {{DNNL_ARG_SRC, operand(cache.stream, e.a, e.a16)},
                                     {DNNL_ARG_WEIGHTS, operand(cache.stream, e.b, e.b16)},
                                     {DNNL_ARG_DST, e.c}});
  cache.stream.wait();
}

int64_t onednn_matmul_cached_primitives() {
  return int64_t(thread_cache().entries.size());
}

}  // namespace loom::cpu
