#include "loom/tensor/cpu/onednn_conv.h"

#include <omp.h>

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "loom/core/error.h"
#include "loom/tensor/cpu/depthwise_weight_grad.h"

namespace loom::cpu {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A primitive is bound to the geometry (batch included), to whether there is a bias, to the
// calling thread's OpenMP thread count and to the precision of its inputs.
using Key = std::tuple<ConvGeometry, bool, int, Precision>;

// One of a primitive's arguments: loom's plain buffer (`user`, its handle set per call) and,
// when the primitive wants another layout, a buffer of that layout and the reorders between.
struct Arg {
  dnnl::memory user, inner;
  std::optional<dnnl::reorder> to_inner, to_user;

  Arg() = default;
  Arg(const dnnl::memory::desc& user_md, const dnnl::memory::desc& want, const dnnl::engine& engine)
      : user(user_md, engine, DNNL_MEMORY_NONE) {
    if (want == user_md) {
      inner = user;  // same handle object: setting user's pointer sets inner's
    } else {
      inner = dnnl::memory(want, engine);
      to_inner.emplace(user, inner);
      to_user.emplace(inner, user);
    }
  }
  // An input: points at p and brings it into the primitive's layout.
  dnnl::memory& read(dnnl::stream& s, const float* p) {
    user.set_data_handle(const_cast<float*>(p));  // oneDNN takes non-const handles
    if (to_inner) to_inner->execute(s, user, inner);
    return inner;
  }
  // An output: points at p; call written() after the primitive ran.
  dnnl::memory& write(float* p) {
    user.set_data_handle(p);
    return inner;
  }
  void written(dnnl::stream& s) {
    if (to_user) to_user->execute(s, inner, user);
  }
};

struct Entry {
  dt in_type = dt::f32;                                // of x, w and dy inside the primitives
  dnnl::memory::desc src_md, wts_md, bias_md, dst_md;  // loom's layouts
  dims strides, dilates, pad_l, pad_r;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Arg fwd_src, fwd_wts, fwd_dst;
  dnnl::memory fwd_bias;
  bool depthwise = false;  // groups = in_c = out_c
  bool have_bwd_data = false;
  dnnl::convolution_backward_data bwd_data;
  Arg bd_wts, bd_ddst, bd_dsrc;
  bool have_bwd_wts = false;
  // A depthwise convolution whose backward-weights primitive oneDNN could make only from its
  // per-channel GEMM fallback: depthwise_weight_grad computes the gradient instead.
  bool weight_grad_by_hand = false;
  dnnl::convolution_backward_weights bwd_wts;
  Arg bw_src, bw_ddst, bw_dwts;
  dnnl::memory bw_dbias;
  // Training forwards' inputs in the primitive's layout, by loom's pointer, each kept for the
  // next backward on that pointer (used once).
  struct Saved {
    dnnl::memory src;
    bool fresh = false;
  };
  std::unordered_map<const float*, Saved> saved;
};

// Geometries seen by one thread: the step's layers, the evaluation batch and a last short batch.
constexpr size_t kMaxCachedGeometries = 256;

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

// md's shape in the layout the primitive picks, with elements of `type`: the inputs (x, w,
// dy) are bf16 in bf16 primitives, the outputs always f32.
dnnl::memory::desc any(const dnnl::memory::desc& md, dt type = dt::f32) {
  return dnnl::memory::desc(md.dims(), type, tag::any);
}

dt input_type(Precision p) {
  LOOM_CHECK(p == Precision::kFp32 || p == Precision::kBf16,
             "the oneDNN convolution runs fp32 or bf16, not {}", precision_name(p));
  return p == Precision::kBf16 ? dt::bf16 : dt::f32;
}

std::string geometry_text(const ConvGeometry& g) {
  return fmt::format(
      "[{}, {}, {}, {}] -> [{}, {}, {}], kernel {}x{}, stride {}x{}, pad {}x{}, dilation {}x{}, "
      "groups {}",
      g.batch, g.in_c, g.in_h, g.in_w, g.out_c, g.out_h, g.out_w, g.kernel_h, g.kernel_w,
      g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups);
}

Entry make_entry(const ConvGeometry& g, bool bias, Precision precision) {
  dnnl::engine& engine = cpu_engine();
  Entry e;
  e.depthwise = g.groups > 1 && g.groups == g.in_c && g.groups == g.out_c;
  e.in_type = input_type(precision);
  e.src_md = dnnl::memory::desc({g.batch, g.in_c, g.in_h, g.in_w}, dt::f32, tag::nchw);
  e.dst_md = dnnl::memory::desc({g.batch, g.out_c, g.out_h, g.out_w}, dt::f32, tag::nchw);
  if (g.groups == 1) {
    e.wts_md = dnnl::memory::desc({g.out_c, g.in_c, g.kernel_h, g.kernel_w}, dt::f32, tag::oihw);
  } else {
    e.wts_md = dnnl::memory::desc(
        {g.groups, g.out_c / g.groups, g.in_c / g.groups, g.kernel_h, g.kernel_w}, dt::f32,
        tag::goihw);
  }
  if (bias) e.bias_md = dnnl::memory::desc({g.out_c}, dt::f32, tag::x);
  e.strides = {g.stride_h, g.stride_w};
  e.dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps
  e.pad_l = {g.pad_h, g.pad_w};
  // oneDNN checks out = (in + pad_l + pad_r - extent) / stride + 1 with integer division, so
  // PyTorch's symmetric padding with a floor fits as it is.
  e.pad_r = {g.pad_h, g.pad_w};
  // Every tensor in the layout the primitive picks: with loom's plain NCHW activations oneDNN
  // falls back to its im2col + GEMM implementation (no faster than loom's own); with blocked
  // ones (nChw8c) it runs its direct JIT kernels, and the reorders to and from them cost a few
  // percent of the convolution.
  const dnnl::convolution_forward::desc fwd_desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      any(e.src_md, e.in_type), any(e.wts_md, e.in_type), e.bias_md, any(e.dst_md), e.strides,
      e.dilates, e.pad_l, e.pad_r);
  e.fwd_pd = dnnl::convolution_forward::primitive_desc(fwd_desc, engine);
  e.fwd = dnnl::convolution_forward(e.fwd_pd);
  e.fwd_src = Arg(e.src_md, e.fwd_pd.src_desc(), engine);
  e.fwd_wts = Arg(e.wts_md, e.fwd_pd.weights_desc(), engine);
  e.fwd_dst = Arg(e.dst_md, e.fwd_pd.dst_desc(), engine);
  if (bias) e.fwd_bias = dnnl::memory(e.bias_md, engine, DNNL_MEMORY_NONE);
  return e;
}

void make_backward_data(Entry& e) {
  dnnl::engine& engine = cpu_engine();
  const dnnl::convolution_backward_data::desc desc(
      dnnl::algorithm::convolution_direct, any(e.src_md), any(e.wts_md, e.in_type),
      any(e.dst_md, e.in_type), e.strides, e.dilates, e.pad_l, e.pad_r);
  const dnnl::convolution_backward_data::primitive_desc pd(desc, engine, e.fwd_pd);
  e.bwd_data = dnnl::convolution_backward_data(pd);
  e.bd_wts = Arg(e.wts_md, pd.weights_desc(), engine);
  e.bd_ddst = Arg(e.dst_md, pd.diff_dst_desc(), engine);
  e.bd_dsrc = Arg(e.src_md, pd.diff_src_desc(), engine);
  e.have_bwd_data = true;
}

void make_backward_weights(Entry& e) {
  dnnl::engine& engine = cpu_engine();
  const dnnl::convolution_backward_weights::desc desc(
      dnnl::algorithm::convolution_direct, any(e.src_md, e.in_type), any(e.wts_md), e.bias_md,
      any(e.dst_md, e.in_type), e.strides, e.dilates, e.pad_l, e.pad_r);
  const dnnl::convolution_backward_weights::primitive_desc pd(desc, engine, e.fwd_pd);
  e.weight_grad_by_hand =
      e.depthwise && std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
  e.bwd_wts = dnnl::convolution_backward_weights(pd);
  e.bw_src = Arg(e.src_md, pd.src_desc(), engine);
  e.bw_ddst = Arg(e.dst_md, pd.diff_dst_desc(), engine);
  e.bw_dwts = Arg(e.wts_md, pd.diff_weights_desc(), engine);
  if (e.bias_md) e.bw_dbias = dnnl::memory(e.bias_md, engine, DNNL_MEMORY_NONE);
  e.have_bwd_wts = true;
}

// The cached entry of (g, bias) on this thread, made if new. `what` names the primitive for
// the error message.
template <typename Make>
Entry& entry(const ConvGeometry& g, bool bias, Precision precision, const char* what,
             Make&& complete) {
  ThreadCache& cache = thread_cache();
  const Key key{g, bias, omp_get_max_threads(), precision};
  try {
    auto it = cache.entries.find(key);
    if (it == cache.entries.end()) {
      if (cache.entries.size() >= kMaxCachedGeometries) cache.entries.clear();
      it = cache.entries.emplace(key, make_entry(g, bias, precision)).first;
    }
    complete(it->second);
    return it->second;
  } catch (const dnnl::error& err) {
    throw Error(fmt::format("oneDNN {} convolution {} for {} could not be created: {}",
                            precision_name(precision), what, geometry_text(g), err.what()));
  }
}

}  // namespace

void onednn_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, Precision precision) {
  Entry& e = entry(g, bias != nullptr, precision, "forward", [](Entry&) {});
  dnnl::stream& s = thread_cache().stream;
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, e.fwd_src.read(s, x)},
                                             {DNNL_ARG_WEIGHTS, e.fwd_wts.read(s, w)},
                                             {DNNL_ARG_DST, e.fwd_dst.write(y)}};
  if (bias) {
    e.fwd_bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, e.fwd_bias);
  }
  e.fwd.execute(s, args);
  e.fwd_dst.written(s);
  s.wait();
}

void onednn_conv_forward_training(const ConvGeometry& g, const float* x, const float* w,
                                  const float* bias, float* y, Precision precision) {
  Entry& e = entry(g, bias != nullptr, precision, "forward", [](Entry&) {});
  if (!e.fwd_src.to_inner) return onednn_conv_forward(g, x, w, bias, y, precision);
  dnnl::stream& s = thread_cache().stream;
  if (e.saved.size() >= 64 && !e.saved.count(x)) e.saved.clear();
  Entry::Saved& kept = e.saved[x];
  if (!kept.src) kept.src = dnnl::memory(e.fwd_pd.src_desc(), cpu_engine());
  e.fwd_src.user.set_data_handle(const_cast<float*>(x));
  e.fwd_src.to_inner->execute(s, e.fwd_src.user, kept.src);
  kept.fresh = true;
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, kept.src},
                                             {DNNL_ARG_WEIGHTS, e.fwd_wts.read(s, w)},
                                             {DNNL_ARG_DST, e.fwd_dst.write(y)}};
  if (bias) {
    e.fwd_bias.set_data_handle(const_cast<float*>(bias));
    args.emplace(DNNL_ARG_BIAS, e.fwd_bias);
  }
  e.fwd.execute(s, args);
  e.fwd_dst.written(s);
  s.wait();
}

void onednn_conv_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                               Precision precision) {
  // The backward data primitive does not depend on the bias: join the entry the layer's
  // forward made, whichever it was.
  const bool bias =
      thread_cache().entries.count(Key{g, true, omp_get_max_threads(), precision}) > 0;
  Entry& e = entry(g, bias, precision, "backward data", [](Entry& en) {
    if (!en.have_bwd_data) make_backward_data(en);
  });
  dnnl::stream& s = thread_cache().stream;
  e.bwd_data.execute(s, {{DNNL_ARG_WEIGHTS, e.bd_wts.read(s, w)},
                         {DNNL_ARG_DIFF_DST, e.bd_ddst.read(s, dy)},
                         {DNNL_ARG_DIFF_SRC, e.bd_dsrc.write(dx)}});
  e.bd_dsrc.written(s);
  s.wait();
}

void onednn_conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                                  float* dbias, Precision precision) {
  Entry& e = entry(g, dbias != nullptr, precision, "backward weights", [](Entry& en) {
    if (!en.have_bwd_wts) make_backward_weights(en);
  });
  if (e.weight_grad_by_hand) return depthwise_weight_grad(g, x, dy, dw, dbias);
  dnnl::stream& s = thread_cache().stream;
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, e.bw_src.read(s, x)},
                                             {DNNL_ARG_DIFF_DST, e.bw_ddst.read(s, dy)},
                                             {DNNL_ARG_DIFF_WEIGHTS, e.bw_dwts.write(dw)}};
  if (dbias) {
    e.bw_dbias.set_data_handle(dbias);
    args.emplace(DNNL_ARG_DIFF_BIAS, e.bw_dbias);
  }
  e.bwd_wts.execute(s, args);
  e.bw_dwts.written(s);
  s.wait();
}

void onednn_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                          float* dx, float* dw, float* dbias, Precision precision) {
  Entry& e = entry(g, dbias != nullptr, precision, "backward", [dx](Entry& en) {
    if (!en.have_bwd_wts) make_backward_weights(en);
    if (dx && !en.have_bwd_data) make_backward_data(en);
  });
  dnnl::stream& s = thread_cache().stream;
  if (e.weight_grad_by_hand) {
    depthwise_weight_grad(g, x, dy, dw, dbias);
    const auto kept = e.saved.find(x);
    if (kept != e.saved.end()) kept->second.fresh = false;
    if (dx) {
      e.bwd_data.execute(s, {{DNNL_ARG_WEIGHTS, e.bd_wts.read(s, w)},
                             {DNNL_ARG_DIFF_DST, e.bd_ddst.read(s, dy)},
                             {DNNL_ARG_DIFF_SRC, e.bd_dsrc.write(dx)}});
      e.bd_dsrc.written(s);
    }
    s.wait();
    return;
  }
  dnnl::memory& ddst = e.bw_ddst.read(s, dy);
  // The training forward's reordered x when it kept one in this primitive's layout.
  dnnl::memory src;
  const auto kept = e.saved.find(x);
  if (kept != e.saved.end() && kept->second.fresh &&
      kept->second.src.get_desc() == e.bw_src.inner.get_desc()) {
    src = kept->second.src;
    kept->second.fresh = false;
  } else {
    src = e.bw_src.read(s, x);
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, e.bw_dwts.write(dw)}};
  if (dbias) {
    e.bw_dbias.set_data_handle(dbias);
    args.emplace(DNNL_ARG_DIFF_BIAS, e.bw_dbias);
  }
  e.bwd_wts.execute(s, args);
  e.bw_dwts.written(s);
  if (dx) {
    // The two primitives take dy in the same layout unless oneDNN picked differently.
    dnnl::memory& data_ddst =
        e.bd_ddst.inner.get_desc() == ddst.get_desc() ? ddst : e.bd_ddst.read(s, dy);
    e.bwd_data.execute(s, {{DNNL_ARG_WEIGHTS, e.bd_wts.read(s, w)},
                           {DNNL_ARG_DIFF_DST, data_ddst},
                           {DNNL_ARG_DIFF_SRC, e.bd_dsrc.write(dx)}});
    e.bd_dsrc.written(s);
  }
  s.wait();
}

int64_t onednn_conv_cached_geometries() {
  return int64_t(thread_cache().entries.size());
}

}  // namespace loom::cpu
