// The ONNX nodes that compute shapes and constants, folded at import into constant values: Shape of
// an activation, Gather, Unsqueeze, Cast, Slice and the arithmetic (Add, Sub, Mul, Div) on
// constants, and Constant nodes.
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"

namespace loom::nn::onnx_import {

void Importer::fold_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"start", "end"});
  const Value& x = activation(n, 0);
  std::vector<int64_t> dims = {kBatch};
  dims.insert(dims.end(), x.shape.begin(), x.shape.end());
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
  if (!data.is_int || data.dims.size() != 1 || !idx.is_int || idx.dims.size() > 1 ||
      attr_int(n, "axis", 0) != 0)
    fail_node(n, "loom folds Gather only to pick entries of a shape (1-D integers, axis 0)");
  Value v;
  v.kind = Value::kConstant;
  v.is_int = true;
  v.dims = idx.dims;
  const int64_t size = int64_t(data.ints.size());
  for (int64_t i : idx.ints) {
    if (i < 0) i += size;
    if (i < 0 || i >= size)
      fail_node(n, fmt::format("index {} is outside a shape of {} entries", i, size));
    v.ints.push_back(data.ints[size_t(i)]);
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
  const int64_t to = attr_int(n, "to", 0);
  const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
  if (!to_int && !to_float) fail_node(n, fmt::format("cast to element type {} is not read", to));
  if (to_int && !v.is_int) {
    for (float f : v.floats)
      v.ints.push_back(std::isfinite(f) && std::fabs(f) < 1e15 ? int64_t(f) : 0);
    v.floats.clear();
    v.is_int = true;
  } else if (to_float && v.is_int) {
    for (int64_t i : v.ints) {
      if (i == kBatch) fail_node(n, "the batch size cannot become a float in loom's graph");
      v.floats.push_back(float(i));
    }
    v.ints.clear();
    v.is_int = false;
  }
  alias(n, v);
}

void Importer::fold_arithmetic(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const std::string& op = n.op_type();
  const Value& a = constant(n, 0);
  const Value& b = constant(n, 1);
  if (a.is_int != b.is_int)
    fail_node(n, "one input is integer and the other float; ONNX requires one element type");
  const size_t na = a.is_int ? a.ints.size() : a.floats.size();
  const size_t nb = b.is_int ? b.ints.size() : b.floats.size();
  if (na != nb && na != 1 && nb != 1)
    fail_node(n, fmt::format("constants of {} and {} elements: loom folds elementwise "
                             "arithmetic of equal sizes or with a single value",
                             na, nb));
  Value v;
  v.kind = Value::kConstant;
  v.is_int = a.is_int;
  v.dims = na >= nb ? a.dims : b.dims;
  const size_t count = std::max(na, nb);
  for (size_t i = 0; i < count; ++i) {
    const size_t ia = na == 1 ? 0 : i, ib = nb == 1 ? 0 : i;
    if (v.is_int) {
      const int64_t x = a.ints[ia], y = b.ints[ib];
      if (x == kBatch || y == kBatch)
        fail_node(n, "it computes with the batch size, which loom's graph leaves open");
      int64_t r = 0;
      bool overflow = false;
      if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
      if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
      if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
      if (op == "Div") {
        if (y == 0) fail_node(n, "integer division by zero");
        r = x / y;  // ONNX's integer Div truncates, as C++ does
      }
      if (overflow) fail_node(n, "the integer result overflows");
      v.ints.push_back(std::max(r, kBatch + 1));
    } else {
      const float x = a.floats[ia], y = b.floats[ib];
      v.floats.push_back(op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
    }
  }
  alias(n, v);
}

void Importer::fold_slice(const onnx::NodeProto& n) {
  const Value& data = constant(n, 0);
  auto one = [&](int k, int64_t def) {
    if (!has_input(n, k)) return def;
    const Value& v = constant(n, k);
    if (!v.is_int || v.ints.size() != 1)
      fail_node(n, "loom folds Slice of constants only along one axis of a 1-D list");
    return v.ints[0];
  };
  if (data.dims.size() != 1 || one(3, 0) != 0 || one(4, 1) != 1)
    fail_node(n, "loom folds Slice of constants only on a 1-D list, step 1");
  const int64_t len = data.dims[0];
  auto clamp = [&](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + len : x, 0, len); };
  const int64_t start = clamp(one(1, 0)), end = std::max(start, clamp(one(2, len)));
  Value v = data;
  v.dims = {end - start};
  if (v.is_int)
    v.ints.assign(data.ints.begin() + start, data.ints.begin() + end);
  else
    v.floats.assign(data.floats.begin() + start, data.floats.begin() + end);
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
    v.ints = {std::max(a.i(), kBatch + 1)};
  } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    v.is_int = true;
    for (int64_t i : a.ints()) v.ints.push_back(std::max(i, kBatch + 1));
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
