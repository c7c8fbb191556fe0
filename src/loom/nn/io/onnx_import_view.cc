// Layout views: ONNX values whose batch axis is not first or not alone. nn.MultiheadAttention
// (inside nn.TransformerEncoder and torchvision's ViT) turns [batch, T, E] into [T, batch, E],
// then [T, batch * heads, d] and [batch * heads, T, d]; loom's graph keeps the batch first and
// open. Such a value keeps its stored tensor (batch first, as the layer that made it wrote it)
// and a view (Value::view) that says which stored axes each ONNX axis is. Transpose and Reshape
// change only the view; an op that reads along the last axis (a linear, softmax, a bias) runs
// on the stored tensor once its last ONNX axis is the last stored one (a transpose layer, made
// only where needed); MatMul of two views orders both stored tensors to a batched product;
// every other op reads the value made whole again (materialized).
#include "loom/config.h"

#if LOOM_HAVE_ONNX

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "loom/nn/io/onnx_importer.h"
#include "loom/nn/layers/attention_parts.h"

namespace loom::nn::onnx_import {

namespace {

using Groups = std::vector<std::vector<int>>;

Groups groups_of(const Value& x) {
  if (!x.view.empty()) return x.view;
  Groups g;
  for (int a = 0; a <= int(x.shape.size()); ++a) g.push_back({a});
  return g;
}

// A view that is [batch] + shape again is dropped.
void normalize(Value& x) {
  if (x.view.empty()) return;
  Groups id;
  for (int a = 0; a <= int(x.shape.size()); ++a) id.push_back({a});
  if (x.view == id) x.view.clear();
}

// The stored atoms in ONNX's row-major order (atoms in no axis left out).
std::vector<int> onnx_order(const Groups& g) {
  std::vector<int> order;
  for (const auto& axis : g) order.insert(order.end(), axis.begin(), axis.end());
  return order;
}

bool has_view_input(const std::map<std::string, Value>& values, const onnx::NodeProto& n) {
  for (const auto& in : n.input()) {
    auto it = values.find(in);
    if (it != values.end() && it->second.kind != Value::kConstant && !it->second.view.empty())
      return true;
  }
  return false;
}

}  // namespace

std::vector<int64_t> Importer::onnx_dims(const Value& x) const {
  std::vector<int64_t> d;
  for (const auto& axis : groups_of(x)) {
    int64_t size = 1;
    bool batch = false;
    for (int a : axis) {
      if (a == 0)
        batch = true;
      else
        size *= x.shape[size_t(a - 1)];
    }
    d.push_back(batch ? batch_times(size) : size);
  }
  return d;
}

Value Importer::arrange(const onnx::NodeProto& n, const Value& x, const std::vector<int>& order) {
  std::vector<int> id(order.size());
  std::iota(id.begin(), id.end(), 0);
  if (order == id) return x;
  if (order.empty() || order[0] != 0) fail_node(n, "a layout keeps the batch first (internal)");
  std::vector<int64_t> perm;
  Shape shape;
  std::vector<int> where(order.size());
  for (size_t i = 0; i < order.size(); ++i) where[size_t(order[i])] = int(i);
  for (size_t i = 1; i < order.size(); ++i) {
    perm.push_back(order[i] - 1);
    shape.push_back(x.shape[size_t(order[i] - 1)]);
  }
  if (int(shape.size()) > Permutation::kMaxRank)
    fail_node(n, fmt::format("its input needs a transpose of {} axes; loom transposes samples of "
                             "at most {}",
                             shape.size(), Permutation::kMaxRank));
  emit(n, "transpose", {&x}, shape, n.op_type() + "Layout", kInner).params["perm"] = cv_ints(perm);
  Value v = inner_value(shape);
  v.view = groups_of(x);
  for (auto& axis : v.view)
    for (int& a : axis) a = where[size_t(a)];
  return v;
}

Value Importer::merge_atoms(const onnx::NodeProto& n, const Value& x, int first, int count) {
  if (count == 1) return x;
  Shape shape;
  for (int a = 1; a <= int(x.shape.size()); ++a) {
    if (a == first) {
      int64_t size = 1;
      for (int b = first; b < first + count; ++b) size *= x.shape[size_t(b - 1)];
      shape.push_back(size);
    } else if (a < first || a >= first + count) {
      shape.push_back(x.shape[size_t(a - 1)]);
    }
  }
  Value v = emit_reshape(n, x, shape, n.op_type() + "Layout");
  v.view = groups_of(x);
  for (auto& axis : v.view) {
    std::vector<int> kept;
    for (int a : axis) {
      if (a > first && a < first + count) continue;  // merged into `first`
      kept.push_back(a >= first + count ? a - count + 1 : a);
    }
    axis = kept;
  }
  return v;
}

Value Importer::last_axes_stored(const onnx::NodeProto& n, const Value& x, int count) {
  const Groups g = groups_of(x);
  if (int(g.size()) < count + 1) fail_node(n, "its input has too few axes (internal)");
  std::vector<int> tail;  // the last `count` ONNX axes' atoms, in order
  for (size_t i = g.size() - size_t(count); i < g.size(); ++i) {
    if (g[i].empty() || std::count(g[i].begin(), g[i].end(), 0))
      fail_node(n, fmt::format("its input is {}: loom reads this op along last axes that are "
                               "neither of size 1 nor the batch's",
                               dims_text(onnx_dims(x))));
    tail.insert(tail.end(), g[i].begin(), g[i].end());
  }
  std::vector<int> order = {0};
  for (int a = 1; a <= int(x.shape.size()); ++a)
    if (!std::count(tail.begin(), tail.end(), a)) order.push_back(a);
  order.insert(order.end(), tail.begin(), tail.end());
  Value v = arrange(n, x, order);
  // Each of the last ONNX axes one stored axis: merged from the back.
  int end = int(v.shape.size()) + 1;
  for (size_t i = g.size(); i-- > g.size() - size_t(count);) {
    const int atoms = int(g[i].size());
    v = merge_atoms(n, v, end - atoms, atoms);
    end -= atoms;
  }
  normalize(v);
  return v;
}

Value Importer::materialized(const onnx::NodeProto& n, const Value& x) {
  if (x.view.empty()) return x;
  const Groups g = groups_of(x);
  const std::vector<int64_t> dims = onnx_dims(x);
  if (g[0] != std::vector<int>{0})
    fail_node(n, fmt::format("its input is {} (the batch axis moved by an earlier Transpose or "
                             "Reshape); loom reads this op only with the batch axis first and "
                             "alone, as in [batch, ...]",
                             dims_text(dims)));
  std::vector<int> order = onnx_order(g);
  for (int a = 1; a <= int(x.shape.size()); ++a)
    if (!std::count(order.begin(), order.end(), a)) order.push_back(a);  // size 1, last
  Value v = arrange(n, x, order);
  Shape want(dims.begin() + 1, dims.end());
  if (want.empty())
    fail_node(n, fmt::format("its input {} leaves each sample without an axis", dims_text(dims)));
  if (v.shape != want) v = emit_reshape(n, v, want, n.op_type() + "Layout");
  v.view.clear();
  return v;
}

Value Importer::compacted(const onnx::NodeProto& n, const Value& x) {
  const Groups g = groups_of(x);
  std::vector<int> order = onnx_order(g);
  if (order.empty() || order[0] != 0) return x;
  for (int a = 1; a <= int(x.shape.size()); ++a)
    if (!std::count(order.begin(), order.end(), a)) order.push_back(a);  // size 1, last
  const Value v = arrange(n, x, order);
  Shape shape;
  Groups view;
  for (const auto& axis : g) {
    view.emplace_back();
    if (std::count(axis.begin(), axis.end(), 0)) view.back().push_back(0);
    int64_t size = 1;
    for (int a : axis)
      if (a != 0) size *= x.shape[size_t(a - 1)];
    if (axis.size() > size_t(view.back().size())) {
      shape.push_back(size);
      view.back().push_back(int(shape.size()));
    }
  }
  if (shape.empty()) shape = {1};
  Value out = shape == v.shape ? v : emit_reshape(n, v, shape, n.op_type() + "Layout");
  out.view = view;
  normalize(out);
  return out;
}

Value Importer::view_transposed(const Value& x, const std::vector<int64_t>& perm) const {
  const Groups g = groups_of(x);
  Value v = x;
  v.view.clear();
  for (int64_t a : perm) v.view.push_back(g[size_t(a)]);
  normalize(v);
  return v;
}

void Importer::view_transpose(const onnx::NodeProto& n, const Value& x) {
  const std::vector<int64_t> perm = transpose_perm(n, int64_t(groups_of(x).size()));
  if (perm.empty())
    fail_node(n, fmt::format("perm {} is not an order of the axes of {}",
                             dims_text(attr_ints(n, "perm", {})), dims_text(onnx_dims(x))));
  alias(n, view_transposed(x, perm));
}

// Reshape of a view: the ONNX value's atoms, in row-major order, regrouped into the target's
// axes. A target axis that ends inside an atom splits it (a reshape of the stored tensor, which
// moves no data); the batch atom is never split.
Value Importer::view_reshaped(const onnx::NodeProto& n, const Value& x, std::vector<int64_t> t) {
  const Groups g = groups_of(x);
  const std::vector<int64_t> dims = onnx_dims(x);
  const std::string asked = dims_text(t);
  auto refuse = [&](const std::string& why) {
    fail_node(n, fmt::format("reshape of {} to {}: {}", dims_text(dims), asked, why));
  };
  // A size as (holds the batch, the factor beside it).
  auto split = [](int64_t d) {
    return is_batch(d) ? std::pair<int, int64_t>{1, batch_factor(d)}
                       : std::pair<int, int64_t>{0, d};
  };
  int64_t total = 1;
  for (int64_t d : dims) total *= split(d).second;
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  int unknown = -1, batches = 0;
  int64_t known = 1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0 && !allowzero) {
      if (i >= dims.size()) refuse("it copies a missing axis");
      t[i] = dims[i];
    }
    if (t[i] == -1) {
      if (unknown >= 0) refuse("more than one axis is -1");
      unknown = int(i);
      continue;
    }
    if (!is_batch(t[i]) && t[i] < 1) refuse("a size is not positive");
    batches += split(t[i]).first;
    known *= split(t[i]).second;
    if (known > total) refuse("the sizes do not hold the same number of elements");
  }
  if (unknown >= 0) {
    if (total % known != 0) refuse("the sizes do not hold the same number of elements");
    t[size_t(unknown)] = batches == 0 ? batch_times(total / known) : total / known;
    batches = 1;
    known = total;
  }
  if (batches != 1 || known != total)
    refuse("the sizes do not hold the batch and the same number of elements per sample");

  // Pieces of the stored atoms: each atom a run of sizes, split where a target axis ends.
  std::vector<std::vector<int64_t>> pieces(x.shape.size() + 1);
  pieces[0] = {kBatch};
  for (size_t a = 1; a <= x.shape.size(); ++a) pieces[a] = {x.shape[a - 1]};
  struct Ref {
    int atom;
    size_t piece;
  };
  std::vector<std::vector<Ref>> out(t.size());
  const std::vector<int> order = onnx_order(g);
  size_t next = 0;   // in order
  size_t piece = 0;  // of order[next]
  for (size_t i = 0; i < t.size(); ++i) {
    auto [need_batch, need] = split(t[i]);
    while (need_batch || need > 1) {
      if (next >= order.size()) refuse("the sizes do not match (internal)");
      const int a = order[next];
      int64_t& size = pieces[size_t(a)][piece];
      if (a == 0) {
        if (!need_batch) refuse("the batch axis would be split or merged into another axis");
        need_batch = 0;
      } else if (need % size == 0) {
        need /= size;
      } else if (size % need == 0) {
        // The axis ends inside this atom: it becomes two pieces.
        const int64_t rest = size / need;
        size = need;
        pieces[size_t(a)].insert(pieces[size_t(a)].begin() + long(piece) + 1, rest);
        need = 1;
      } else {
        refuse(fmt::format("an axis of {} would be cut across a stored axis of {}", t[i], size));
      }
      out[i].push_back({a, piece});
      if (++piece == pieces[size_t(a)].size()) ++next, piece = 0;
    }
  }
  // What is left has size 1: atoms in no axis.
  Value v = x;
  bool splits = false;
  Shape shape;
  std::vector<std::vector<int>> index(pieces.size());  // (atom, piece) -> new atom
  index[0] = {0};
  for (size_t a = 1; a < pieces.size(); ++a) {
    splits = splits || pieces[a].size() > 1;
    for (int64_t s : pieces[a]) {
      shape.push_back(s);
      index[a].push_back(int(shape.size()));
    }
  }
  if (splits) {
    if (int(shape.size()) > Permutation::kMaxRank) {
      // Fewer stored axes first (Swin's windows, [batch, 8, 7, 8, 7, C] viewed as
      // [batch*64, 49, C], cut again into heads): each ONNX axis one stored axis.
      const Value c = compacted(n, x);
      if (c.shape.size() < x.shape.size()) return view_reshaped(n, c, t);
      refuse(fmt::format("loom's samples have at most {} axes", Permutation::kMaxRank));
    }
    v = emit_reshape(n, x, shape);
  }
  v.view.clear();
  for (const auto& axis : out) {
    std::vector<int> atoms;
    for (const Ref& r : axis) atoms.push_back(index[size_t(r.atom)][r.piece]);
    v.view.push_back(atoms);
  }
  normalize(v);
  return v;
}

Value Importer::squeezed(const onnx::NodeProto& n, const Value& x) {
  Shape shape;
  std::vector<int> index(x.shape.size() + 1, -1);  // old atom -> new, -1: dropped
  index[0] = 0;
  for (size_t a = 1; a <= x.shape.size(); ++a)
    if (x.shape[a - 1] != 1) {
      shape.push_back(x.shape[a - 1]);
      index[a] = int(shape.size());
    }
  if (shape.size() == x.shape.size()) return x;
  if (shape.empty()) shape = {1}, index[1] = 1;
  Value v = emit_reshape(n, x, shape, n.op_type() + "Layout");
  for (const auto& axis : groups_of(x)) {
    std::vector<int> atoms;
    for (int a : axis)
      if (index[size_t(a)] >= 0) atoms.push_back(index[size_t(a)]);
    v.view.push_back(atoms);
  }
  normalize(v);
  return v;
}

Value Importer::view_product(const onnx::NodeProto& n, const Value& a_in, const Value& b_in) {
  // Axes of size 1 (MaxViT's single window at its last stage) are dropped from the stored
  // tensors first, so that both inputs' leading axes split alike.
  const Value a = squeezed(n, a_in), b = squeezed(n, b_in);
  const Groups ga = groups_of(a), gb = groups_of(b);
  const size_t r = ga.size();
  const std::vector<int64_t> da = onnx_dims(a), db = onnx_dims(b);
  const std::string what = fmt::format(
      "inputs {} and {}: loom multiplies activations [..., M, K] and [..., K, N] whose leading "
      "axes are the same and hold the batch",
      dims_text(da), dims_text(db));
  if (r < 3 || gb.size() != r || da[r - 1] != db[r - 2] ||
      !std::equal(da.begin(), da.end() - 2, db.begin()))
    fail_node(n, what);
  // The leading axes must split into the same stored sizes in both, so that one stored order
  // enumerates both alike; the batch goes first, the rest keep ONNX's order.
  auto size_of = [](const Value& x, int atom) {
    return atom == 0 ? kBatch : x.shape[size_t(atom - 1)];
  };
  auto order_for = [&](const Value& x, const Groups& g) {
    std::vector<int> order = {0};
    for (size_t i = 0; i + 2 < r; ++i)
      for (int atom : g[i])
        if (atom != 0) order.push_back(atom);
    for (size_t i = r - 2; i < r; ++i) {
      if (g[i].empty() || std::count(g[i].begin(), g[i].end(), 0)) fail_node(n, what);
      order.insert(order.end(), g[i].begin(), g[i].end());
    }
    if (order.size() != x.shape.size() + 1) fail_node(n, what);  // atoms in no axis
    return order;
  };
  for (size_t i = 0; i + 2 < r; ++i) {
    std::vector<int64_t> sa, sb;
    for (int atom : ga[i]) sa.push_back(size_of(a, atom));
    for (int atom : gb[i]) sb.push_back(size_of(b, atom));
    if (sa != sb) fail_node(n, what);
  }
  bool batch_lead = false;
  for (size_t i = 0; i + 2 < r; ++i)
    batch_lead = batch_lead || std::count(ga[i].begin(), ga[i].end(), 0);
  if (!batch_lead) fail_node(n, what);
  // Each input stored as [batch, lead..., rows, columns], its last two axes one atom each.
  auto stored = [&](const Value& x, const Groups& g) {
    Value v = arrange(n, x, order_for(x, g));
    const int cols = int(g[r - 1].size()), rows = int(g[r - 2].size());
    const int rank = int(v.shape.size());
    v = merge_atoms(n, v, rank - cols + 1, cols);
    v = merge_atoms(n, v, int(v.shape.size()) - rows, rows);
    return v;
  };
  Value sa = stored(a, ga), sb = stored(b, gb);
  const Groups product_axes = sa.view;  // a's, the last of size N
  sa.view.clear();
  sb.view.clear();
  Shape shape = MatMul::output_shape(sa.shape, sb.shape);
  if (shape.empty()) fail_node(n, what);
  emit(n, "matmul", {&sa, &sb}, shape, "", kInner);
  Value out = inner_value(shape);
  out.view = product_axes;
  normalize(out);
  return out;
}

// Einsum of two activations that is a batched matrix product: every index in both inputs and
// the result (batch, heads, groups), in one input and the result (rows, columns), or in both
// inputs only (summed). Each input is put in order [batch indices, rows, summed] and
// [batch indices, summed, columns] by views, multiplied, and the product's axes put in the
// result's order; MaxViT's "B G H I D, B G H J D -> B G H I J" is q kᵀ.
void Importer::einsum(const onnx::NodeProto& n) {
  only_attrs(n, {"equation"});
  std::string eq;
  for (char c : attr_string(n, "equation"))
    if (c != ' ') eq += c;
  const size_t comma = eq.find(','), arrow = eq.find("->");
  const std::string what = fmt::format(
      "equation '{}': loom reads Einsum of two activations as a batched matrix product "
      "(\"bhid,bhjd->bhij\"): each index once per term, in both inputs and the result, in one "
      "input and the result, or summed over both inputs",
      attr_string(n, "equation"));
  if (n.input_size() != 2 || comma == std::string::npos || arrow == std::string::npos ||
      comma > arrow || eq.find("...") != std::string::npos)
    fail_node(n, what);
  const std::string ta = eq.substr(0, comma), tb = eq.substr(comma + 1, arrow - comma - 1),
                    to = eq.substr(arrow + 2);
  const Value& a = activation(n, 0);
  const Value& b = activation(n, 1);
  const std::vector<int64_t> da = onnx_dims(a), db = onnx_dims(b);
  auto distinct = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return std::isalpha(uint8_t(c)); }) &&
           std::set<char>(t.begin(), t.end()).size() == t.size();
  };
  if (!distinct(ta) || !distinct(tb) || !distinct(to) || ta.size() != da.size() ||
      tb.size() != db.size())
    fail_node(n, what);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ta.size(); ++i) size[ta[i]] = da[i];
  for (size_t i = 0; i < tb.size(); ++i)
    if (size.count(tb[i]) && size[tb[i]] != db[i])
      fail_node(n, fmt::format("index '{}' is {} in one input and {} in the other", tb[i],
                               dims_text({size[tb[i]]}), dims_text({db[i]})));
    else
      size[tb[i]] = db[i];
  std::string lead, rows, cols, sum;  // index letters by class, rows and columns in `to`'s order
  for (char c : to) {
    const bool in_a = ta.find(c) != std::string::npos, in_b = tb.find(c) != std::string::npos;
    (in_a && in_b ? lead : in_a ? rows : in_b ? cols : sum) += c;
  }
  for (char c : ta)
    if (tb.find(c) != std::string::npos && to.find(c) == std::string::npos) sum += c;
  if (rows.empty() || cols.empty() || sum.empty() ||
      lead.size() + rows.size() + sum.size() != ta.size() ||
      lead.size() + cols.size() + sum.size() != tb.size())
    fail_node(n, what);
  // One input as [lead..., the product of `first`, the product of `second`].
  auto operand = [&](const Value& x, const std::string& t, const std::string& first,
                     const std::string& second) {
    std::vector<int64_t> perm, shape;
    for (const std::string& part : {lead, first, second})
      for (char c : part) perm.push_back(int64_t(t.find(c)));
    for (char c : lead) shape.push_back(size[c]);
    for (const std::string& part : {first, second}) {
      int64_t p = 1;
      for (char c : part) {
        if (is_batch(size[c])) fail_node(n, what + "; the batch is not a shared index here");
        p *= size[c];
      }
      shape.push_back(p);
    }
    return view_reshaped(n, view_transposed(x, perm), shape);
  };
  const Value product = view_product(n, operand(a, ta, rows, sum), operand(b, tb, sum, cols));
  // [lead..., rows..., cols...], then the result's order.
  std::vector<int64_t> shape;
  std::string order = lead + rows + cols;
  for (char c : order) shape.push_back(size[c]);
  std::vector<int64_t> perm;
  for (char c : to) perm.push_back(int64_t(order.find(c)));
  alias(n, view_transposed(view_reshaped(n, product, shape), perm));
}

void Importer::read_on_storage(const onnx::NodeProto& n, int last_axes) {
  // The view inputs as stored (arranged where the op reads along the last axis); later readers
  // find them arranged too.
  std::vector<std::pair<std::string, Value>> saved;
  for (const auto& in : n.input()) {
    auto it = values_.find(in);
    if (it == values_.end() || it->second.kind == Value::kConstant || it->second.view.empty())
      continue;
    // (A pattern, masked attention scores, was arranged when the mask was read.)
    if (last_axes > 0 && it->second.kind == Value::kActivation)
      it->second = last_axes_stored(n, it->second, last_axes);
    saved.emplace_back(in, it->second);
  }
  if (saved.empty()) return read_node(n);
  const Groups view = saved[0].second.view;
  const size_t rank = saved[0].second.shape.size();
  for (auto& [name, v] : saved) values_[name].view.clear();
  try {
    read_node(n);
  } catch (...) {
    for (auto& [name, v] : saved) values_[name] = v;
    throw;
  }
  for (auto& [name, v] : saved) values_[name] = v;
  for (const auto& out : n.output()) {
    auto it = values_.find(out);
    if (out.empty() || it == values_.end()) continue;
    if (it->second.kind == Value::kConstant || it->second.shape.size() != rank)
      fail_node(n, "its result does not keep the stored axes of its input's layout (internal)");
    it->second.view = view;
    normalize(it->second);
  }
}

bool Importer::fixed_bias_add(const onnx::NodeProto& n) {
  if (n.op_type() != "Add" || n.input_size() != 2) return false;
  const int k = input(n, 0).kind == Value::kActivation ? 0 : 1;
  const Value& x = input(n, k);
  const Value& c = input(n, 1 - k);
  // A constant computed in the file (not a weight PyTorch might train, not a table's entries)
  // of more than one value: a scalar or a [D] row is a bias the readers before this one take.
  if (x.kind != Value::kActivation || c.kind != Value::kConstant || c.is_int ||
      !c.unusable.empty() || weights_.count(n.input(1 - k)) || !c.table.empty() ||
      c.floats.size() < 2 || int64_t(c.floats.size()) != elements(c.dims))
    return false;
  const Groups g = groups_of(x);
  const std::vector<int64_t> dims = onnx_dims(x);
  bool fits = c.dims.size() <= dims.size();
  for (size_t j = 0; fits && j < c.dims.size(); ++j) {
    const int64_t d = c.dims[j], e = dims[j + dims.size() - c.dims.size()];
    fits = d == 1 || d == e;
  }
  if (!fits)
    fail_node(n, fmt::format("a constant of {} does not broadcast to its input {}",
                             dims_text(c.dims), dims_text(dims)));
  // c's stride along each ONNX axis of x (0 where it broadcasts), which must be 0 along the axis
  // that holds the batch: the addend is the same for every sample.
  std::vector<int64_t> stride(dims.size(), 0);
  int64_t step = 1;
  for (size_t i = dims.size(); i-- > dims.size() - c.dims.size();) {
    const int64_t d = c.dims[i - (dims.size() - c.dims.size())];
    if (d != 1) {
      if (std::count(g[i].begin(), g[i].end(), 0))
        fail_node(n, fmt::format("a constant of {} added to {} differs between samples; loom adds "
                                 "a constant the same for every sample only",
                                 dims_text(c.dims), dims_text(dims)));
      stride[i] = step;
    }
    step *= d;
  }
  // The addend in x's stored order: each stored element's ONNX coordinates from its atoms'.
  const int64_t count = elements(x.shape);
  std::vector<float> bias(static_cast<size_t>(count));
  std::vector<int64_t> at(x.shape.size() + 1, 0);  // each atom's coordinate; the batch's 0
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t rest = e, a = int64_t(x.shape.size()); a >= 1; --a) {
      at[size_t(a)] = rest % x.shape[size_t(a - 1)];
      rest /= x.shape[size_t(a - 1)];
    }
    int64_t from = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      if (stride[i] == 0) continue;
      int64_t coord = 0;
      for (int a : g[i]) coord = coord * x.shape[size_t(a - 1)] + at[size_t(a)];
      from += coord * stride[i];
    }
    bias[size_t(e)] = c.floats[size_t(from)];
  }
  const std::vector<std::vector<int>> view = x.view;
  LayerSpec& l = emit(n, "fixed_bias", {&x}, x.shape);
  l.init_state = std::move(bias);
  values_[n.output(0)].view = view;
  return true;
}

bool Importer::read_view_node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  auto activation_at = [&](int k) {
    if (!has_input(n, k)) return false;
    auto it = values_.find(n.input(k));
    return it != values_.end() && it->second.kind == Value::kActivation;
  };
  if (op == "Transpose" && activation_at(0)) {
    only_attrs(n, {"perm"});
    const Value& x = values_.at(n.input(0));
    const std::vector<int64_t> perm = attr_ints(n, "perm", {});
    if (!x.view.empty() || (!perm.empty() && perm[0] != 0) || (perm.empty() && !x.shape.empty())) {
      view_transpose(n, x);
      return true;
    }
    return false;
  }
  if (op == "Reshape" && activation_at(0)) {
    only_attrs(n, {"allowzero"});
    const Value& x = values_.at(n.input(0));
    const Value& s = constant(n, 1);
    if (!s.is_int || s.dims.size() != 1)
      fail_node(n, fmt::format("shape '{}' is not a list of integers", n.input(1)));
    std::vector<int64_t> t = s.ints;
    bool simple =
        x.view.empty() && !t.empty() &&
        (t[0] == kBatch || t[0] == -1 || t[0] == 0 || (static_batch_ > 0 && t[0] == static_batch_));
    for (size_t i = 1; simple && i < t.size(); ++i) simple = !is_batch(t[i]);
    // [-1, ...] of fewer elements than a sample has merges other axes into the batch's (Swin's
    // attn.view(-1, heads, N, N) after its mask).
    if (simple && t[0] == -1 &&
        std::all_of(t.begin() + 1, t.end(), [](int64_t d) { return d > 0; })) {
      int64_t rest = 1;
      for (size_t i = 1; i < t.size() && rest <= elements(x.shape); ++i) rest *= t[i];
      simple = rest == elements(x.shape);
    }
    if (simple) return false;
    alias(n, view_reshaped(n, x, std::move(t)));
    return true;
  }
  if (op == "Einsum") {
    einsum(n);
    return true;
  }
  if (!has_view_input(values_, n)) return false;
  // Ops that read views themselves.
  if (op == "Shape" || op == "Slice" || op == "Split" || op == "Gather" || op == "Identity")
    return false;
  static const std::set<std::string> elementwise = {
      "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Dropout", "HardSigmoid", "HardSwish", "Clip"};
  static const std::set<std::string> along_last = {"Softmax", "Gemm", "LayerNormalization"};
  if (elementwise.count(op) || along_last.count(op)) {
    read_on_storage(n, along_last.count(op) ? 1 : 0);
    return true;
  }
  // A relative position bias over the last three ([..., heads, w*w, w*w]).
  if (op == "Add" && is_table_bias_add(n)) {
    read_on_storage(n, 3);
    return true;
  }
  // A causal mask over the last two axes (attention scores [batch * heads, T, T]).
  if (op == "Where" || (op == "Add" && causal_mask_add(n))) {
    read_on_storage(n, 2);
    return true;
  }
  if (fixed_bias_add(n)) return true;
  if (op == "MatMul" && activation_at(0)) {
    if (!activation_at(1)) {
      read_on_storage(n, 1);
      return true;
    }
    alias(n, view_product(n, values_.at(n.input(0)), values_.at(n.input(1))));
    return true;
  }
  if ((op == "Mul" || op == "Div" || op == "Add" || op == "Sub") && n.input_size() == 2) {
    const Value& a = input(n, 0);
    const Value& b = input(n, 1);
    // By a scalar (a scale), or a linear's bias: per element, or along the last axis.
    for (const Value* c : {&a, &b}) {
      if (c->kind != Value::kConstant) continue;
      const size_t count = c->is_int ? c->ints.size() : c->floats.size();
      // (x / sqrt(2) read by an Erf starts GELU's erf form, which is read on whole values.)
      if (count == 1 && op != "Add" && op != "Sub" && !read_only_by(n.output(0), "Erf")) {
        read_on_storage(n, 0);
        return true;
      }
      if (op == "Add" && (matmul_layers_.count(n.input(0)) || matmul_layers_.count(n.input(1)))) {
        read_on_storage(n, 1);
        return true;
      }
    }
    // Two views of one layout: per element on the stored tensors.
    if (a.kind == Value::kActivation && b.kind == Value::kActivation && a.view == b.view &&
        a.shape == b.shape) {
      read_on_storage(n, 0);
      return true;
    }
  }
  for (const auto& in : n.input()) {
    auto it = values_.find(in);
    if (it != values_.end() && it->second.kind == Value::kActivation && !it->second.view.empty())
      it->second = materialized(n, it->second);
  }
  return false;
}

}  // namespace loom::nn::onnx_import

#endif  // LOOM_HAVE_ONNX
