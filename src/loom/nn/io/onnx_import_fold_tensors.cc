// Folds of constant tensors of any rank, with ONNX's broadcasting: the elementwise ops (Add, Sub,
// Mul, Div, Mod, Pow, the comparisons and logic, Sqrt, Reciprocal, Neg, Not), Range, ScatterND,
// Expand and Concat of constants. torch.onnx writes what a module computes from its input's
// shape as such nodes: Swin's shifted-window mask is ConstantOfShape, Range, ScatterND, Slice and
// comparisons on [H, W] planes, and its padding is Mod arithmetic on the map's size. With the
// input's per-sample shape fixed at import, they are constants.
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"

namespace loom::nn::onnx_import {

bool broadcast_dims(const std::vector<const std::vector<int64_t>*>& shapes,
                    std::vector<int64_t>& out) {
  out.clear();
  for (const std::vector<int64_t>* s : shapes) {
    if (s->size() > out.size()) out.insert(out.begin(), s->size() - out.size(), 1);
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t& d = out[out.size() - s->size() + i];
      const int64_t e = (*s)[i];
      if (d != e && d != 1 && e != 1) return false;
      if (d == 1) d = e;
    }
  }
  int64_t count = 1;
  for (int64_t d : out)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > kMaxComputed) return false;
  return true;
}

int64_t broadcast_source(const std::vector<int64_t>& out, const std::vector<int64_t>& dims,
                         int64_t i) {
  int64_t from = 0, stride = 1;
  for (size_t k = out.size(); k-- > 0;) {
    const int64_t at = i % out[k];
    i /= out[k];
    if (k + dims.size() < out.size()) continue;
    const int64_t d = dims[k + dims.size() - out.size()];
    from += (d == 1 ? 0 : at) * stride;
    stride *= d;
  }
  return from;
}

namespace {

size_t count_of(const Value& v) {
  return v.is_int ? v.ints.size() : v.floats.size();
}

bool comparison(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
         op == "GreaterOrEqual";
}

// x op y for a comparison op, as 1 or 0.
template <typename T>
int64_t compared(const std::string& op, T x, T y) {
  return op == "Equal"         ? x == y
         : op == "Less"        ? x < y
         : op == "Greater"     ? x > y
         : op == "LessOrEqual" ? x <= y
                               : x >= y;
}

// The ops of one input; the others folded here take two.
bool unary(const std::string& op) {
  return op == "Sqrt" || op == "Reciprocal" || op == "Neg" || op == "Not";
}

int64_t floor_mod(int64_t x, int64_t y) {
  const int64_t r = x % y;
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

}  // namespace

const Value& Importer::whole_constant(const onnx::NodeProto& n, int k) const {
  const Value& v = constant(n, k);
  if (int64_t(count_of(v)) != elements(v.dims))
    fail_node_input(n, fmt::format("input '{}': a constant of {} holds {} values", n.input(k),
                                   dims_text(v.dims), count_of(v)));
  return v;
}

bool Importer::folds_elementwise(const onnx::NodeProto& n) const {
  static const std::set<std::string> binary = {"Add",
                                               "Sub",
                                               "Mul",
                                               "Div",
                                               "Mod",
                                               "Pow",
                                               "Equal",
                                               "Less",
                                               "Greater",
                                               "LessOrEqual",
                                               "GreaterOrEqual",
                                               "And",
                                               "Or",
                                               "Xor"};
  const bool one = unary(n.op_type()), two = binary.count(n.op_type()) > 0;
  if (!one && !two) return false;
  for (int k = 0; k < (one ? 1 : 2); ++k)
    if (!has_input(n, k) || input(n, k).kind != Value::kConstant) return false;
  return true;
}

void Importer::fold_elementwise(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  only_attrs(n, op == "Mod" ? std::initializer_list<const char*>{"fmod"}
                            : std::initializer_list<const char*>{});
  const bool one_input = unary(op);
  const Value& a = whole_constant(n, 0);
  const Value& b = one_input ? a : whole_constant(n, 1);
  // Pow's exponent may have another element type (ONNX's T1); every other op takes one type.
  if (a.is_int != b.is_int && op != "Pow")
    fail_node(n, "one input is integer and the other float; ONNX requires one element type");
  const bool logic = op == "And" || op == "Or" || op == "Xor" || op == "Not";
  if (logic && !a.is_int) fail_node(n, "a logical op of float constants");
  if ((op == "Sqrt" || op == "Reciprocal") && a.is_int) fail_node(n, "it is applied to integers");
  const bool fmod = attr_int(n, "fmod", 0) != 0;
  if (op == "Mod" && !a.is_int && !fmod) fail_node_input(n, "Mod of floats needs fmod = 1 (ONNX)");
  std::vector<int64_t> dims;
  if (!broadcast_dims({&a.dims, &b.dims}, dims))
    fail_node(n, fmt::format("constants of {} and {} do not broadcast (to at most 2^25 values)",
                             dims_text(a.dims), dims_text(b.dims)));
  Value v;
  v.kind = Value::kConstant;
  v.dims = dims;
  v.is_int = a.is_int || comparison(op);
  const int64_t count = elements(dims);
  for (int64_t i = 0; i < count; ++i) {
    const size_t ia = size_t(broadcast_source(dims, a.dims, i));
    const size_t ib = size_t(broadcast_source(dims, b.dims, i));
    if (a.is_int && b.is_int) {
      const int64_t x = a.ints[ia], y = b.ints[ib];
      if (op == "Equal") {
        // The batch size equals only itself (expand's -1 test on [batch, -1, -1]).
        v.ints.push_back(x == y);
        continue;
      }
      if (is_batch(x) || (!one_input && is_batch(y))) {
        if (op != "Add" && op != "Sub" && op != "Mul" && op != "Div")
          fail_node(n, "it computes with the batch size, which loom's graph leaves open");
        v.ints.push_back(batch_arithmetic(n, x, y));
        continue;
      }
      int64_t r = 0;
      bool overflow = false;
      if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
      if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
      if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
      if (op == "Neg") overflow = __builtin_sub_overflow(int64_t(0), x, &r);
      if (op == "Div" || op == "Mod") {
        if (y == 0) fail_node(n, "integer division by zero");
        if (x == kBatchEnd && y == -1) fail_node(n, "the integer result overflows");
        // ONNX's integer Div truncates, as C++ does; Mod takes the divisor's sign unless fmod.
        r = op == "Div" ? x / y : fmod ? x % y : floor_mod(x, y);
      }
      if (op == "Pow") {
        const double p = std::pow(double(x), double(y));
        if (!(std::fabs(p) < 9e18)) fail_node(n, "the integer result overflows");
        r = int64_t(std::llround(p));
      }
      if (comparison(op)) r = compared(op, x, y);
      if (op == "And") r = (x != 0) && (y != 0);
      if (op == "Or") r = (x != 0) || (y != 0);
      if (op == "Xor") r = (x != 0) != (y != 0);
      if (op == "Not") r = x == 0;
      if (overflow) fail_node(n, "the integer result overflows");
      v.ints.push_back(std::max(r, kBatchEnd));
      continue;
    }
    auto at = [&](const Value& c, size_t k) {
      if (c.is_int && is_batch(c.ints[k]))
        fail_node(n, "it computes with the batch size, which loom's graph leaves open");
      return c.is_int ? double(c.ints[k]) : double(c.floats[k]);
    };
    const double x = at(a, ia), y = at(b, ib);
    if (comparison(op)) {
      v.ints.push_back(compared(op, x, y));
    } else if (a.is_int) {  // Pow of an integer base by a float exponent
      const double p = std::pow(x, y);
      if (!(std::fabs(p) < 9e18)) fail_node(n, "the integer result overflows");
      v.ints.push_back(int64_t(std::llround(p)));
    } else {
      // In float, as a runtime computes the node (the attention scale 1/sqrt(d) keeps its bits).
      const float fx = float(x), fy = float(y);
      v.floats.push_back(op == "Add"          ? fx + fy
                         : op == "Sub"        ? fx - fy
                         : op == "Mul"        ? fx * fy
                         : op == "Div"        ? fx / fy
                         : op == "Mod"        ? std::fmod(fx, fy)
                         : op == "Pow"        ? float(std::pow(x, y))
                         : op == "Sqrt"       ? std::sqrt(fx)
                         : op == "Reciprocal" ? 1.0f / fx
                                              : -fx);
    }
  }
  alias(n, v);
}

void Importer::fold_range(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value& start = constant(n, 0);
  const Value& limit = constant(n, 1);
  const Value& delta = constant(n, 2);
  for (const Value* v : {&start, &limit, &delta})
    if (count_of(*v) != 1 || v->is_int != start.is_int)
      fail_node_input(n, "start, limit and delta are not three scalars of one type");
  Value v;
  v.kind = Value::kConstant;
  v.is_int = start.is_int;
  if (v.is_int) {
    const int64_t s = start.ints[0], l = limit.ints[0], d = delta.ints[0];
    if (is_batch(s) || is_batch(l) || is_batch(d))
      fail_node(n, "a range of the batch size: loom's graph leaves it open");
    if (d == 0) fail_node_input(n, "delta is 0");
    // ceil((l - s) / d) in doubles: the ends are shapes' sizes, far inside 2^53.
    const double steps = std::ceil((double(l) - double(s)) / double(d));
    if (steps > double(kMaxComputed)) fail_node(n, "the result is too large");
    for (int64_t k = 0; k < int64_t(std::max(steps, 0.0)); ++k) v.ints.push_back(s + k * d);
  } else {
    const double s = start.floats[0], l = limit.floats[0], d = delta.floats[0];
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      fail_node_input(n, "delta is 0 or a bound is not finite");
    const double steps = std::ceil((l - s) / d);
    if (steps > double(kMaxComputed)) fail_node(n, "the result is too large");
    for (int64_t k = 0; k < int64_t(std::max(steps, 0.0)); ++k)
      v.floats.push_back(float(s + double(k) * d));
  }
  v.dims = {int64_t(count_of(v))};
  alias(n, v);
}

void Importer::fold_scatter_nd(const onnx::NodeProto& n) {
  only_attrs(n, {"reduction"});
  if (attr_string(n, "reduction") != "" && attr_string(n, "reduction") != "none")
    fail_node(n, fmt::format("reduction '{}': loom folds ScatterND that writes values only",
                             attr_string(n, "reduction")));
  const Value& data = whole_constant(n, 0);
  const Value& idx = whole_constant(n, 1);
  const Value& updates = whole_constant(n, 2);
  if (!idx.is_int || idx.dims.empty() || data.is_int != updates.is_int)
    fail_node_input(n, "indices are not integers, or data and updates differ in type");
  const int64_t k = idx.dims.back(), rank = int64_t(data.dims.size());
  if (k < 1 || k > rank) fail_node_input(n, "the index tuples are longer than data's rank");
  // updates: the indices' leading axes, then data's axes after the first k.
  std::vector<int64_t> want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + k, data.dims.end());
  if (updates.dims != want || int64_t(count_of(updates)) != elements(want))
    fail_node_input(
        n, fmt::format("updates are {}; data {} and indices {} need {}", dims_text(updates.dims),
                       dims_text(data.dims), dims_text(idx.dims), dims_text(want)));
  Value v = data;
  v.table.clear();
  v.table_index.clear();
  int64_t slice = 1;
  for (int64_t a = k; a < rank; ++a) slice *= data.dims[size_t(a)];
  const int64_t tuples = elements(idx.dims) / k;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t a = 0; a < k; ++a) {
      int64_t i = idx.ints[size_t(t * k + a)];
      const int64_t len = data.dims[size_t(a)];
      if (!is_batch(i) && i < 0) i += len;
      if (is_batch(i) || i < 0 || i >= len)
        fail_node_input(n, fmt::format("index {} is outside axis {} of {}", dims_text({i}), a,
                                       dims_text(data.dims)));
      offset = offset * len + i;
    }
    for (int64_t e = 0; e < slice; ++e) {
      const size_t to = size_t(offset * slice + e), from = size_t(t * slice + e);
      if (v.is_int)
        v.ints[to] = updates.ints[from];
      else
        v.floats[to] = updates.floats[from];
    }
  }
  alias(n, v);
}

void Importer::fold_expand(const onnx::NodeProto& n) {
  const Value& c = whole_constant(n, 0);
  const Value& s = constant(n, 1);
  std::vector<int64_t> dims;
  if (!s.is_int || s.dims.size() != 1 || !broadcast_dims({&c.dims, &s.ints}, dims))
    fail_node(n, fmt::format("a constant of {} does not expand to {} (of at most 2^25 values)",
                             dims_text(c.dims), dims_text(s.ints)));
  Value v = c;
  v.dims = dims;
  v.ints.clear();
  v.floats.clear();
  v.table.clear();
  v.table_index.clear();
  for (int64_t i = 0; i < elements(dims); ++i) {
    const size_t from = size_t(broadcast_source(dims, c.dims, i));
    if (v.is_int)
      v.ints.push_back(c.ints[from]);
    else
      v.floats.push_back(c.floats[from]);
  }
  alias(n, v);
}

void Importer::fold_concat(const onnx::NodeProto& n) {
  const Value& first = constant(n, 0);
  const int64_t rank = int64_t(first.dims.size());
  int64_t axis = attr_int(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank)
    fail_node_input(n, fmt::format("axis {} is not an axis of {}", attr_int(n, "axis", 0),
                                   dims_text(first.dims)));
  Value v;
  v.kind = Value::kConstant;
  v.is_int = first.is_int;
  v.dims = first.dims;
  v.dims[size_t(axis)] = 0;
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= first.dims[size_t(a)];
  for (int k = 0; k < n.input_size(); ++k) {
    const Value& c = whole_constant(n, k);
    std::vector<int64_t> off = c.dims, want = first.dims;
    if (off.size() == want.size()) off[size_t(axis)] = want[size_t(axis)] = 0;
    if (off != want || c.is_int != first.is_int)
      fail_node_input(n, fmt::format("constants {} and {} do not join on axis {}",
                                     dims_text(first.dims), dims_text(c.dims), axis));
    v.dims[size_t(axis)] += c.dims[size_t(axis)];
  }
  if (elements(v.dims) > kMaxElements) fail_node(n, "the result is too large");
  // Row by row of the axes before `axis`: each input's block for that row in turn.
  for (int64_t o = 0; o < outer; ++o)
    for (int k = 0; k < n.input_size(); ++k) {
      const Value& c = constant(n, k);
      const size_t block = count_of(c) / size_t(std::max<int64_t>(outer, 1));
      if (v.is_int)
        v.ints.insert(v.ints.end(), c.ints.begin() + o * block, c.ints.begin() + (o + 1) * block);
      else
        v.floats.insert(v.floats.end(), c.floats.begin() + o * block,
                        c.floats.begin() + (o + 1) * block);
    }
  alias(n, v);
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
