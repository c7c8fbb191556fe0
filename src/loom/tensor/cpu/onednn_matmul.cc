#include "loom/tensor/cpu/onednn_matmul.h"

#include <omp.h>

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "loom/core/error.h"

namespace loom::cpu {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

// Everything a primitive is specialised for. alpha and beta are baked in as an output scale and
// a sum post-op: the training step only ever uses (1, 0), so runtime scales would buy nothing.
using Key =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, int>;

struct Entry {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

// Shapes seen by one thread: the step's GEMMs, the evaluation batches and a last short batch.
// A run that keeps changing shapes (it should not) is bounded by starting over.
constexpr size_t kMaxCachedPrimitives = 256;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct ThreadCache {
  dnnl::stream stream{cpu_engine()};
  std::map<Key, Entry> entries;
};

ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

// Row-major [rows, cols] stored transposed or not, with leading dimension ld.
dnnl::memory::desc matrix(int64_t rows, int64_t cols, bool transposed, int64_t ld) {
  return dnnl::memory::desc(dims{rows, cols}, dt::f32, transposed ? dims{1, ld} : dims{ld, 1});
}

Entry make_entry(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 int64_t lda, int64_t ldb, float beta, int64_t ldc) {
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
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
  return Entry{dnnl::matmul(pd), dnnl::memory(a_md, engine, DNNL_MEMORY_NONE),
               dnnl::memory(b_md, engine, DNNL_MEMORY_NONE),
               dnnl::memory(c_md, engine, DNNL_MEMORY_NONE)};
}

}  // namespace

void onednn_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  ThreadCache& cache = thread_cache();
  const Key key{trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, omp_get_max_threads()};
  auto it = cache.entries.find(key);
  if (it == cache.entries.end()) {
    if (cache.entries.size() >= kMaxCachedPrimitives) cache.entries.clear();
    try {
      it = cache.entries
               .emplace(key, make_entry(trans_a, trans_b, m, n, k, alpha, lda, ldb, beta, ldc))
               .first;
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("oneDNN matmul {}x{}x{} (trans {}{}) could not be created: {}", m, n,
                              k, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', e.what()));
    }
  }
  Entry& e = it->second;
  // oneDNN takes non-const handles; the primitive only reads its sources.
  e.a.set_data_handle(const_cast<float*>(a));
  e.b.set_data_handle(const_cast<float*>(b));
  e.c.set_data_handle(c);
  e.primitive.execute(cache.stream,
                      {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
  cache.stream.wait();
}

int64_t onednn_matmul_cached_primitives() {
  return int64_t(thread_cache().entries.size());
}

}  // namespace loom::cpu
