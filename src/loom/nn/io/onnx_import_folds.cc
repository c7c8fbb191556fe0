// The ONNX nodes that compute shapes and constants, folded at import into constant values: Shape of
// an activation, Gather, Unsqueeze, Cast, Slice, Reshape, Transpose and ConstantOfShape of
// constants, and Constant nodes (the elementwise ops and the rest: onnx_import_fold_tensors.cc).
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"

namespace loom::nn::onnx_import {

void Importer::fold_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"start", "end"});
  const Value& x = input(n, 0);
  const std::vector<int64_t> dims =
      x.kind == Value::kConstant ? x.dims : onnx_dims(activation(n, 0));
  const int64_t rank = int64_t(dims.size());
  auto clamp = [&](int64_t i) {
    if (i < 0) i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  const int64_t start = clamp(attr_int(n, "start", 0));
  const int64_t end = clamp(attr_int(n, "end", rank));
  Value v;
  v.kind = Value::kConstant;
  v.is_int = true;
  if (start < end) v.ints.assign(dims.begin() + start, dims.begin() + end);
  v.dims = {int64_t(v.ints.size())};
  alias(n, v);
}

void Importer::fold_gather(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Value& data = constant(n, 0);
  const Value& idx = constant(n, 1);
  if (!idx.is_int || attr_int(n, "axis", 0) != 0 || data.dims.empty() ||
      (data.is_int && (data.dims.size() != 1 || idx.dims.size() > 1)))
    fail_node(n,
              "loom folds Gather of constants on axis 0 only: entries of a shape (1-D "
              "integers), or rows of a table by a constant index");
  Value v;
  v.kind = Value::kConstant;
  v.is_int = data.is_int;
  v.dims = idx.dims;
  v.dims.insert(v.dims.end(), data.dims.begin() + 1, data.dims.end());
  const int64_t size = data.dims[0], row = size > 0 ? elements(data.dims) / size : 0;
  // Rows of a float initializer (Swin's and MaxViT's relative position table) stay traced to
  // it: a layer may learn them (table_bias).
  const bool traced = !data.is_int && (!data.table.empty() || initializers_.count(n.input(0)));
  if (traced) v.table = data.table.empty() ? n.input(0) : data.table;
  for (int64_t i : idx.ints) {
    if (is_batch(i)) fail_node(n, "the index is the batch size, which loom's graph leaves open");
    if (i < 0) i += size;
    if (i < 0 || i >= size)
      fail_node(n, fmt::format("index {} is outside an axis of {} entries", i, size));
    for (int64_t k = i * row; k < (i + 1) * row; ++k) {
      if (data.is_int)
        v.ints.push_back(data.ints[size_t(k)]);
      else
        v.floats.push_back(data.floats[size_t(k)]);
      if (traced) v.table_index.push_back(data.table.empty() ? k : data.table_index[size_t(k)]);
    }
  }
  alias(n, v);
}

void Importer::fold_unsqueeze(const onnx::NodeProto& n) {
  only_attrs(n, {"axes"});
  const Value& data = constant(n, 0);
  std::vector<int64_t> axes = attr_ints(n, "axes", {});
  if (has_input(n, 1)) {
    const Value& a = constant(n, 1);
    if (!a.is_int) fail_node(n, "axes are not integers");
    axes = a.ints;
  }
  const int64_t rank = int64_t(data.dims.size() + axes.size());
  if (axes.empty() || rank > 8) fail_node(n, "axes are missing or too many");
  std::vector<bool> one(size_t(rank), false);
  for (int64_t a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || one[size_t(a)])
      fail_node(n, fmt::format("axes {} do not fit a result of rank {}", dims_text(axes), rank));
    one[size_t(a)] = true;
  }
  Value v = data;
  v.dims.clear();
  size_t from = 0;
  for (int64_t i = 0; i < rank; ++i) v.dims.push_back(one[size_t(i)] ? 1 : data.dims[from++]);
  alias(n, v);
}

void Importer::fold_cast(const onnx::NodeProto& n) {
  only_attrs(n, {"to", "saturate"});
  Value v = constant(n, 0);
  v.table.clear();  // a cast value is computed, not the table's
  v.table_index.clear();
  const int64_t to = attr_int(n, "to", 0);
  const bool to_bool = to == onnx::TensorProto::BOOL;
  const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32 || to_bool;
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
  if (!to_int && !to_float) fail_node(n, fmt::format("cast to element type {} is not read", to));
  if (to_int && !v.is_int) {
    for (float f : v.floats)
      v.ints.push_back(to_bool                                   ? f != 0.0f
                       : std::isfinite(f) && std::fabs(f) < 1e15 ? int64_t(f)
                                                                 : 0);
    v.floats.clear();
    v.is_int = true;
  }
  if (to_bool)
    for (int64_t& i : v.ints) {
      if (is_batch(i)) fail_node(n, "the batch size cannot become a bool in loom's graph");
      i = i != 0;
    }
  if (to_float && v.is_int) {
    for (int64_t i : v.ints) {
      if (is_batch(i)) fail_node(n, "the batch size cannot become a float in loom's graph");
      v.floats.push_back(float(i));
    }
    v.ints.clear();
    v.is_int = false;
  }
  alias(n, v);
}

// The batch size times a positive integer, times or divided by another (B * heads, B * T / T):
// what a view of the batch merged with other axes needs. A sum with the batch size has no
// meaning in loom's graph, which leaves it open.
int64_t Importer::batch_arithmetic(const onnx::NodeProto& n, int64_t x, int64_t y) const {
  const std::string& op = n.op_type();
  const char* open = "it computes with the batch size, which loom's graph leaves open";
  if (is_batch(x) && is_batch(y)) fail_node(n, open);
  const int64_t m = batch_factor(is_batch(x) ? x : y), c = is_batch(x) ? y : x;
  int64_t r = 0;
  if (op == "Mul" && c > 0 && !__builtin_mul_overflow(m, c, &r) && r < kBatchEnd - kBatch)
    return batch_times(r);
  if (op == "Div" && is_batch(x) && c > 0 && m % c == 0) return batch_times(m / c);
  fail_node(n, open);
}

// Reshape of a constant (torch.onnx's handling of expand(batch, -1, -1)): the same values.
void Importer::fold_reshape(const onnx::NodeProto& n) {
  only_attrs(n, {"allowzero"});
  const Value& data = constant(n, 0);
  const Value& s = constant(n, 1);
  if (!s.is_int || s.dims.size() != 1)
    fail_node(n, fmt::format("shape '{}' is not a list of integers", n.input(1)));
  const int64_t count = elements(data.dims);
  std::vector<int64_t> dims = s.ints;
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && attr_int(n, "allowzero", 0) == 0 && i < data.dims.size())
      dims[i] = data.dims[i];
    if (dims[i] == -1 && unknown < 0) {
      unknown = int(i);
    } else if (dims[i] < 0 || is_batch(dims[i]) || __builtin_mul_overflow(known, dims[i], &known)) {
      fail_node(n, fmt::format("shape {} is not one for a constant of {} values", dims_text(s.ints),
                               count));
    }
  }
  if (unknown >= 0 && known > 0 && count % known == 0) dims[size_t(unknown)] = count / known;
  if (elements(dims) != count)
    fail_node(n, fmt::format("shape {} does not hold the constant's {} values", dims_text(s.ints),
                             count));
  Value v = data;
  v.dims = dims;
  alias(n, v);
}

void Importer::fold_constant_of_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"value"});
  const Value& s = constant(n, 0);
  if (!s.is_int || s.dims.size() != 1)
    fail_node(n, fmt::format("shape '{}' is not a list of integers", n.input(0)));
  for (int64_t d : s.ints)
    if (d < 0 || is_batch(d))
      fail_node(n, fmt::format("shape {}: loom folds ConstantOfShape of a constant shape only",
                               dims_text(s.ints)));
  int64_t count = 1;
  for (int64_t d : s.ints)
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxComputed)
      fail_node(n, fmt::format("shape {}: the result is too large", dims_text(s.ints)));
  Value fill;
  fill.kind = Value::kConstant;
  fill.floats = {0.0f};
  if (const auto* a = Attrs{n}.find("value")) {
    if (a->type() != onnx::AttributeProto::TENSOR)
      fail_node_input(n, "attribute 'value' is not a tensor");
    fill = tensor_value(a->t(), fmt::format("{}: value", node_text(n)));
    if (fill.ints.size() + fill.floats.size() != 1 || !fill.unusable.empty())
      fail_node(n, "attribute 'value' is not one number");
  }
  Value v = fill;
  v.dims = s.ints;
  if (v.is_int)
    v.ints.assign(size_t(count), fill.ints[0]);
  else
    v.floats.assign(size_t(count), fill.floats[0]);
  alias(n, v);
}

void Importer::fold_slice(const onnx::NodeProto& n) {
  const Value& data = constant(n, 0);
  auto list = [&](int k) {
    const Value& v = constant(n, k);
    if (!v.is_int || v.dims.size() != 1)
      fail_node(n, fmt::format("input '{}' is not a list of integers", n.input(k)));
    return v.ints;
  };
  const std::vector<int64_t> starts = list(1), ends = list(2);
  const int64_t rank = int64_t(data.dims.size());
  std::vector<int64_t> axes;
  if (has_input(n, 3)) {
    axes = list(3);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  const std::vector<int64_t> steps =
      has_input(n, 4) ? list(4) : std::vector<int64_t>(starts.size(), 1);
  if (rank < 1 || ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    fail_node(n, "starts, ends, axes and steps differ in length, or the constant has no axis");
  // The kept elements of every axis: lo, lo + step, ... (count of them), as ONNX clamps the
  // bounds (a negative step runs from the end: x[::-1]).
  std::vector<int64_t> lo(size_t(rank), 0), step(size_t(rank), 1), dims = data.dims;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] == 0 || is_batch(steps[i]))
      fail_node(n, "loom folds Slice of constants along their own axes, by a nonzero step");
    const int64_t len = data.dims[size_t(a)], s = steps[i];
    auto clamp = [&](int64_t x, int64_t low, int64_t high) {
      if (is_batch(x)) fail_node(n, "a bound is the batch size, which loom's graph leaves open");
      return std::clamp<int64_t>(x < 0 ? x + len : x, low, high);
    };
    const int64_t first = s > 0 ? clamp(starts[i], 0, len) : clamp(starts[i], -1, len - 1);
    const int64_t last = s > 0 ? clamp(ends[i], 0, len) : clamp(ends[i], -1, len - 1);
    lo[size_t(a)] = first;
    step[size_t(a)] = s;
    // ceil((last - first) / s), at least 0
    dims[size_t(a)] = s > 0 ? std::max<int64_t>(0, (last - first + s - 1) / s)
                            : std::max<int64_t>(0, (first - last + (-s) - 1) / (-s));
  }
  Value v = data;
  v.ints.clear();
  v.floats.clear();
  v.table_index.clear();
  v.dims = dims;
  const int64_t count = elements(v.dims);
  // Each kept element, its source index from its coordinates.
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, from = 0, stride = 1;
    for (int64_t a = rank - 1; a >= 0; --a) {
      const int64_t d = v.dims[size_t(a)];
      from += (lo[size_t(a)] + (rest % d) * step[size_t(a)]) * stride;
      rest /= d;
      stride *= data.dims[size_t(a)];
    }
    if (v.is_int)
      v.ints.push_back(data.ints[size_t(from)]);
    else
      v.floats.push_back(data.floats[size_t(from)]);
    if (!data.table.empty()) v.table_index.push_back(data.table_index[size_t(from)]);
  }
  alias(n, v);
}

void Importer::fold_transpose(const onnx::NodeProto& n) {
  const Value& data = constant(n, 0);
  const int64_t rank = int64_t(data.dims.size());
  const std::vector<int64_t> perm = transpose_perm(n, rank);
  if (perm.empty())
    fail_node(n, fmt::format("perm {} is not an order of the constant's axes",
                             dims_text(attr_ints(n, "perm", {}))));
  Value v = data;
  v.ints.clear();
  v.floats.clear();
  v.table_index.clear();
  std::vector<int64_t> stride(size_t(rank), 1);  // of the source's axes
  for (int64_t a = rank - 2; a >= 0; --a)
    stride[size_t(a)] = stride[size_t(a + 1)] * data.dims[size_t(a + 1)];
  for (int64_t a = 0; a < rank; ++a) v.dims[size_t(a)] = data.dims[size_t(perm[size_t(a)])];
  const int64_t count = elements(v.dims);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, from = 0;
    for (int64_t a = rank - 1; a >= 0; --a) {
      from += (rest % v.dims[size_t(a)]) * stride[size_t(perm[size_t(a)])];
      rest /= v.dims[size_t(a)];
    }
    if (v.is_int)
      v.ints.push_back(data.ints[size_t(from)]);
    else
      v.floats.push_back(data.floats[size_t(from)]);
    if (!data.table.empty()) v.table_index.push_back(data.table_index[size_t(from)]);
  }
  alias(n, v);
}

void Importer::constant_node(const onnx::NodeProto& n) {
  if (n.attribute_size() != 1) fail_node_input(n, "a Constant has exactly one attribute");
  const auto& a = n.attribute(0);
  Value v;
  v.kind = Value::kConstant;
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    v = tensor_value(a.t(), fmt::format("{}: value", node_text(n)));
  } else if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
    v.floats = {a.f()};
  } else if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
    v.floats.assign(a.floats().begin(), a.floats().end());
    v.dims = {int64_t(v.floats.size())};
  } else if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
    v.is_int = true;
    v.ints = {std::max(a.i(), kBatchEnd)};
  } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    v.is_int = true;
    for (int64_t i : a.ints()) v.ints.push_back(std::max(i, kBatchEnd));
    v.dims = {int64_t(v.ints.size())};
  } else {
    fail_node(n, fmt::format("attribute '{}' is not one loom reads (value, value_float(s), "
                             "value_int(s))",
                             a.name()));
  }
  alias(n, v);
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
