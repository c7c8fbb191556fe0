// The ONNX ops that move values between layouts without arithmetic, each a loom layer or
// nothing: Flatten and Reshape (flatten, or reshape to another per-sample shape), Transpose,
// Slice and Split on activations (slice layers), and ReduceMean over an image's plane (the
// global average pool). The batch axis always stays first and whole.
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"

namespace loom::nn::onnx_import {

bool Importer::squeeze_kept_pool(const onnx::NodeProto& n, const Value& x) {
  auto it = layer_index_.find(x.layer);
  if (it == layer_index_.end() || uses_[n.input(0)] != 1) return false;
  LayerSpec& pool = graph_.layers[it->second];
  if (pool.type != "globalavgpool2d" || !pool.params.count("keep_dims")) return false;
  // Every reader of the pool must be n: an Identity's alias of it read elsewhere counts too.
  for (const auto& [name, v] : values_)
    if (v.kind == Value::kActivation && v.layer == x.layer && name != n.input(0) && uses_[name] > 0)
      return false;
  pool.params.erase("keep_dims");
  Value v = x;
  v.shape = {x.shape[0]};
  alias(n, v);
  return true;
}

void Importer::flatten(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& x = activation(n, 0);
  int64_t axis = attr_int(n, "axis", 1);
  if (axis < 0) axis += int64_t(x.shape.size()) + 1;
  if (axis != 1)
    fail_node(n, fmt::format("axis {} is not read; loom flattens each sample (axis = 1)",
                             attr_int(n, "axis", 1)));
  if (x.shape.size() == 1) return alias(n, x);
  if (squeeze_kept_pool(n, x)) return;
  emit(n, "flatten", {&x}, {elements(x.shape)});
}

void Importer::reshape(const onnx::NodeProto& n) {
  only_attrs(n, {"allowzero"});
  const Value& x = activation(n, 0);
  const Value& s = constant(n, 1);
  if (!s.is_int || s.dims.size() != 1)
    fail_node(n, fmt::format("shape '{}' is not a list of integers", n.input(1)));
  std::vector<int64_t> t = s.ints;
  if (!t.empty() && static_batch_ > 0 && t[0] == static_batch_) t[0] = kBatch;
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  const std::string target = dims_text(t);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == 0 && !allowzero) {
      if (i > x.shape.size()) fail_node(n, fmt::format("shape {} copies a missing axis", target));
      t[i] = i == 0 ? kBatch : x.shape[i - 1];
    }
  const int64_t numel = elements(x.shape);
  Shape per_sample;
  bool ok = !t.empty() && (t[0] == kBatch || t[0] == -1);
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 1; ok && i < t.size(); ++i) {
    if (t[i] == -1 && t[0] != -1 && unknown < 0) {
      unknown = int(i);
    } else if (t[i] < 1 || __builtin_mul_overflow(known, t[i], &known) || known > numel) {
      ok = false;
    }
    per_sample.push_back(t[i]);
  }
  if (ok && unknown >= 0) {
    ok = known > 0 && numel % known == 0;
    if (ok) per_sample[size_t(unknown - 1)] = numel / known;
  } else if (ok) {
    ok = known == numel;
  }
  if (!ok || per_sample.empty())
    fail_node(n, fmt::format("reshape of {} to {}: loom reads Reshape only when it keeps the "
                             "batch axis first and each sample's size",
                             batch_shape_text(x.shape), target));
  if (per_sample == x.shape) return alias(n, x);
  if (per_sample.size() == 1) {
    if (squeeze_kept_pool(n, x)) return;
    emit(n, "flatten", {&x}, per_sample);
    return;
  }
  if (int(per_sample.size()) > Permutation::kMaxRank)
    fail_node(n, fmt::format("reshape to {}: loom's samples have at most {} axes", target,
                             Permutation::kMaxRank));
  emit(n, "reshape", {&x}, per_sample).params["shape"] = cv_ints(per_sample);
}

void Importer::transpose(const onnx::NodeProto& n) {
  only_attrs(n, {"perm"});
  if (input(n, 0).kind == Value::kConstant) return fold_transpose(n);
  const Value& x = activation(n, 0);
  const int64_t rank = int64_t(x.shape.size()) + 1;
  const std::vector<int64_t> perm = transpose_perm(n, rank);
  if (perm.empty())
    fail_node(n, fmt::format("perm {} is not an order of the axes of {}",
                             dims_text(attr_ints(n, "perm", {})), batch_shape_text(x.shape)));
  if (perm[0] != 0)
    fail_node(n, fmt::format("perm {} moves the batch axis; loom transposes the axes of each "
                             "sample only",
                             dims_text(perm)));
  std::vector<int64_t> p;
  Shape out;
  bool identity = true;
  for (size_t i = 1; i < perm.size(); ++i) {
    p.push_back(perm[i] - 1);
    out.push_back(x.shape[size_t(perm[i] - 1)]);
    identity = identity && perm[i] == int64_t(i);
  }
  if (identity) return alias(n, x);
  if (int(out.size()) > Permutation::kMaxRank)
    fail_node(n, fmt::format("input {}: loom transposes samples of at most {} axes",
                             batch_shape_text(x.shape), Permutation::kMaxRank));
  emit(n, "transpose", {&x}, out).params["perm"] = cv_ints(p);
}

Value Importer::emit_slice(const onnx::NodeProto& n, const Value& x, int64_t axis, int64_t start,
                           int64_t end, int output, bool drop) {
  // The stored axis behind ONNX axis `axis`: itself without a view; with one, the single
  // stored axis it is (or none: an axis of size 1).
  int atom = int(axis);
  if (!x.view.empty()) {
    const std::vector<int>& atoms = x.view[size_t(axis)];
    if (atoms.size() > 1)
      fail_node(n, fmt::format("axis {} of {} merges several axes of the stored tensor; loom "
                               "slices an axis that is one",
                               axis, dims_text(onnx_dims(x))));
    atom = atoms.empty() ? -1 : atoms[0];
  }
  Value v = x;
  if (atom > 0 && !(start == 0 && end == x.shape[size_t(atom - 1)])) {
    Shape out = x.shape;
    out[size_t(atom - 1)] = end - start;
    LayerSpec& l = emit(n, "slice", {&x}, out, drop ? "Slice" : "", kInner);
    l.params["axis"] = cv(int64_t(atom - 1));
    l.params["start"] = cv(start);
    l.params["end"] = cv(end);
    v = inner_value(out);
    v.view = x.view;
  }
  if (drop && !x.view.empty()) {
    // The axis leaves the view; its stored axis, now of size 1, stays in no axis.
    v.view.erase(v.view.begin() + axis);
  } else if (drop) {
    Shape dropped = v.shape;
    dropped.erase(dropped.begin() + (atom - 1));
    if (dropped.empty())
      fail_node(n, fmt::format("one index of {} would leave each sample without an axis",
                               batch_shape_text(x.shape)));
    v = emit_reshape(n, v, dropped);
  }
  if (output != kInner) define(n.output(output), v);
  return v;
}

void Importer::slice(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (input(n, 0).kind == Value::kConstant) return fold_slice(n);
  const Value& x = activation(n, 0);
  auto ints = [&](int k, const char* what) {
    const Value& v = constant(n, k);
    if (!v.is_int || v.dims.size() != 1)
      fail_node(n, fmt::format("{} '{}' is not a list of integers", what, n.input(k)));
    return v.ints;
  };
  const std::vector<int64_t> starts = ints(1, "starts"), ends = ints(2, "ends");
  const std::vector<int64_t> dims = onnx_dims(x);
  const int64_t rank = int64_t(dims.size());
  std::vector<int64_t> axes;
  if (has_input(n, 3)) {
    axes = ints(3, "axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  std::vector<int64_t> steps(starts.size(), 1);
  if (has_input(n, 4)) steps = ints(4, "steps");
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail_node_input(n, "starts, ends, axes and steps differ in length");
  // Each listed axis, its range clamped as ONNX does, cut in turn (Swin's x[:, :H, :W, :]).
  struct Cut {
    int64_t axis, start, end, step;
  };
  std::vector<Cut> cuts;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) fail_node(n, fmt::format("axis {} is not an axis", axes[i]));
    if (steps[i] < 1)
      fail_node(n,
                fmt::format("step {}: loom slices activations forward, step 1 or more", steps[i]));
    if (is_batch(dims[size_t(a)])) {
      if (starts[i] == 0 && steps[i] == 1 && (is_batch(ends[i]) || ends[i] >= (int64_t(1) << 31)))
        continue;
      fail_node(n, "it slices the batch axis; loom slices the axes of each sample only");
    }
    const int64_t len = dims[size_t(a)];
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
    const int64_t s = clamp(starts[i]), e = clamp(ends[i]);
    if (s >= e)
      fail_node(n, fmt::format("the range [{}, {}) of axis {} is empty", starts[i], ends[i], a));
    if (s == 0 && e == len && steps[i] == 1) continue;
    for (const Cut& c : cuts)
      if (c.axis == a) fail_node_input(n, fmt::format("axis {} is listed twice", a));
    cuts.push_back({a, s, e, steps[i]});
  }
  if (cuts.empty()) return alias(n, x);
  Value v = x;
  for (size_t k = 0; k < cuts.size(); ++k) {
    const Cut& c = cuts[k];
    const int out = k + 1 == cuts.size() ? 0 : kInner;
    if (c.step == 1) {
      v = emit_slice(n, v, c.axis, c.start, c.end, out);
      continue;
    }
    // Every step-th element from c.start (Swin's patch merging, x[..., 0::2, 1::2, :]): a
    // range of count * step elements holding them, cut into [count, step], and one index of
    // the step.
    const int64_t len = onnx_dims(v)[size_t(c.axis)], step = c.step;
    const int64_t count = (c.end - c.start + step - 1) / step;
    const int64_t offset = std::max<int64_t>(0, c.start + count * step - len);
    if (offset > c.start)
      fail_node(n, fmt::format("elements {}, {}, ... of an axis of {}: loom takes every step-th "
                               "element only from a range of whole steps within the axis",
                               c.start, c.start + step, len));
    const int64_t first = c.start - offset;
    if (first != 0 || first + count * step != len)
      v = emit_slice(n, v, c.axis, first, first + count * step, kInner);
    std::vector<int64_t> target = onnx_dims(v);
    target[size_t(c.axis)] = step;
    target.insert(target.begin() + c.axis, count);
    v = view_reshaped(n, v, target);
    v = emit_slice(n, v, c.axis + 1, offset, offset + 1, out, true);
  }
}

void Importer::split(const onnx::NodeProto& n) {
  only_attrs(n, {"axis", "split"});
  const Value& x = activation(n, 0);
  const std::vector<int64_t> dims = onnx_dims(x);
  const int64_t rank = int64_t(dims.size());
  int64_t axis = attr_int(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || is_batch(dims[size_t(axis)]))
    fail_node(n, fmt::format("axis {} is not an axis of a sample of {}", attr_int(n, "axis", 0),
                             dims_text(dims)));
  const int64_t len = dims[size_t(axis)];
  std::vector<int64_t> sizes = attr_ints(n, "split", {});
  if (has_input(n, 1)) {
    const Value& v = constant(n, 1);
    if (!v.is_int) fail_node(n, "split sizes are not integers");
    sizes = v.ints;
  }
  const int64_t parts = n.output_size();
  if (sizes.empty()) {
    if (parts < 1 || len % parts != 0)
      fail_node(n, fmt::format("{} outputs do not split an axis of {} evenly", parts, len));
    sizes.assign(size_t(parts), len / parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s > 0 ? s : -(int64_t(1) << 40);
  if (int64_t(sizes.size()) != parts || total != len)
    fail_node(n, fmt::format("sizes {} do not split an axis of {} into {} parts", dims_text(sizes),
                             len, parts));
  int64_t at = 0;
  for (int k = 0; k < parts; ++k) {
    if (!n.output(k).empty()) emit_slice(n, x, axis, at, at + sizes[size_t(k)], k);
    at += sizes[size_t(k)];
  }
}

// Gather of one index on a per-sample axis (x[:, 0], a class token or the last position): a
// slice, and a reshape that drops the axis where the index is a scalar.
void Importer::gather(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& x = activation(n, 0);
  const Value& idx = constant(n, 1);
  const std::vector<int64_t> dims = onnx_dims(x);
  const int64_t rank = int64_t(dims.size());
  int64_t axis = attr_int(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (!idx.is_int || idx.ints.size() != 1 || idx.dims.size() > 1 || axis < 0 || axis >= rank ||
      is_batch(dims[size_t(axis)]))
    fail_node(n, fmt::format("loom reads Gather of an activation only as one index on a "
                             "per-sample axis of {}",
                             dims_text(dims)));
  const int64_t len = dims[size_t(axis)];
  int64_t i = idx.ints[0] < 0 ? idx.ints[0] + len : idx.ints[0];
  if (i < 0 || i >= len)
    fail_node(n, fmt::format("index {} is outside an axis of {}", idx.ints[0], len));
  emit_slice(n, x, axis, i, i + 1, 0, idx.dims.empty());
}

void Importer::reduce_mean(const onnx::NodeProto& n) {
  only_attrs(n, {"axes", "keepdims"});
  const Value& x = activation(n, 0);
  std::vector<int64_t> axes = attr_ints(n, "axes", {});
  const int64_t rank = int64_t(x.shape.size()) + 1;
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (int64_t& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  if (axes.front() < 1 || axes.back() >= rank ||
      std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    fail_node(n, fmt::format("axes {} of {}: loom averages over axes of each sample, not over "
                             "the batch",
                             dims_text(attr_ints(n, "axes", {})), batch_shape_text(x.shape)));
  const bool keep = attr_int(n, "keepdims", 1) != 0;
  if (rank == 4 && axes == std::vector<int64_t>{2, 3}) {
    // The plane of an image: the global average pool itself.
    LayerSpec& l =
        emit(n, "globalavgpool2d", {&x}, keep ? Shape{x.shape[0], 1, 1} : Shape{x.shape[0]});
    if (keep) l.params["keep_dims"] = cv(true);
    return;
  }
  // Any other axes (the positions of [T, D], pooled for a sequence's class): those kept, then
  // those averaged, as [kept, averaged, 1], whose global average pool is the mean.
  std::vector<int64_t> perm, kept_axes;
  for (int64_t a = 1; a < rank; ++a)
    if (!std::binary_search(axes.begin(), axes.end(), a)) perm.push_back(a - 1);
  const size_t kept_count = perm.size();
  for (int64_t a : axes) perm.push_back(a - 1);
  int64_t kept = 1, averaged = 1;
  Shape out;
  for (size_t i = 0; i < perm.size(); ++i)
    (i < kept_count ? kept : averaged) *= x.shape[size_t(perm[i])];
  for (int64_t a = 1; a < rank; ++a) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), a);
    if (!reduced || keep) out.push_back(reduced ? 1 : x.shape[size_t(a - 1)]);
  }
  if (out.empty()) out = {1};
  Value v = x;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  if (!identity) {
    Shape t;
    for (int64_t a : perm) t.push_back(x.shape[size_t(a)]);
    emit(n, "transpose", {&v}, t, "Transpose", kInner).params["perm"] = cv_ints(perm);
    v = inner_value(t);
  }
  const Shape planes = {kept, averaged, 1};
  v = emit_reshape(n, v, planes, "Reshape");
  if (out == Shape{kept}) {
    emit(n, "globalavgpool2d", {&v}, out);
    return;
  }
  emit(n, "globalavgpool2d", {&v}, {kept}, "", kInner);
  v = inner_value({kept});
  emit(n, "reshape", {&v}, out).params["shape"] = cv_ints(out);
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
