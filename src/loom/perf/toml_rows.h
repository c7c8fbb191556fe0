// Reading [[kind]] rows of the built-in TOML tables (catalog.toml, validation.toml): every
// error names the file, the entry, its line and the field.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom::perf {

// The whole table of `text`; a syntax error is an InputError naming file `name` and the line.
inline toml::table parse_toml_table(const std::string& text, const std::string& name) {
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw InputError(
        fmt::format("{}:{}: TOML syntax error: {}", name, e.source().begin.line, e.description()));
  }
}

// Reads the fields of one [[kind]] row, naming file, entry and field in every error.
class RowReader {
 public:
  RowReader(const toml::table& row, const std::string& file, const std::string& kind, size_t index)
      : row_(row), file_(file), kind_(kind) {
    entry_ = fmt::format("{} #{}", kind, index + 1);
    if (auto* n = row.get("name"); n && n->is_string())
      entry_ = fmt::format("{} '{}'", kind, **n->as_string());
    line_ = row.source().begin.line;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(
        fmt::format("{}: {} (line {}): field '{}' {}", file_, entry_, line_, field, problem));
  }

  std::string str(const std::string& field, bool required = true,
                  const std::string& def = "") const {
    const toml::node* n = row_.get(field);
    if (!n) {
      if (required) fail(field, "is missing");
      return def;
    }
    if (!n->is_string()) fail(field, "must be a string");
    std::string s = **n->as_string();
    if (required && s.empty()) fail(field, "must not be empty");
    return s;
  }

  // A number > 0 (or >= 0 when allow_zero); absent optional numbers give `def`.
  double num(const std::string& field, bool required = true, bool allow_zero = false,
             double def = 0) const {
    const toml::node* n = row_.get(field);
    if (!n) {
      if (required) fail(field, "is missing");
      return def;
    }
    const double v = finite_number(field, *n);
    if (allow_zero ? v < 0 : v <= 0)
      fail(field, fmt::format("must be {} 0, got {}", allow_zero ? ">=" : ">", v));
    return v;
  }

  // Any finite number, negative ones included; required.
  double signed_num(const std::string& field) const {
    const toml::node* n = row_.get(field);
    if (!n) fail(field, "is missing");
    return finite_number(field, *n);
  }

  bool has(const std::string& field) const { return row_.get(field) != nullptr; }

  // An array of strings; absent gives an empty list.
  std::vector<std::string> strs(const std::string& field) const {
    std::vector<std::string> out;
    const toml::node* n = row_.get(field);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(field, "must be an array of strings");
    for (const auto& e : *a) {
      if (!e.is_string()) fail(field, "must be an array of strings");
      out.push_back(**e.as_string());
    }
    return out;
  }

  bool flag(const std::string& field, bool def) const {
    const toml::node* n = row_.get(field);
    if (!n) return def;
    if (!n->is_boolean()) fail(field, "must be true or false");
    return **n->as_boolean();
  }

  int count(const std::string& field, int def) const {
    const double v = num(field, false, false, def);
    if (v != std::floor(v)) fail(field, fmt::format("must be a whole number, got {}", v));
    return static_cast<int>(v);
  }

  void check_known(const std::vector<std::string>& fields) const {
    for (auto& [k, v] : row_) {
      std::string key(k.str());
      if (std::find(fields.begin(), fields.end(), key) == fields.end())
        fail(key, fmt::format("is not a known field; known: {}", fmt::join(fields, ", ")));
    }
  }

 private:
  double finite_number(const std::string& field, const toml::node& n) const {
    double v = 0;
    if (n.is_integer())
      v = static_cast<double>(**n.as_integer());
    else if (n.is_floating_point())
      v = **n.as_floating_point();
    else
      fail(field, "must be a number");
    if (!std::isfinite(v)) fail(field, "must be finite");
    return v;
  }

  const toml::table& row_;
  std::string file_, kind_, entry_;
  uint32_t line_ = 0;
};

template <typename Fn>
inline void for_rows(const toml::table& root, const std::string& file, const std::string& kind,
                     Fn fn) {
  const toml::node* n = root.get(kind);
  if (!n) return;
  const toml::array* arr = n->as_array();
  if (!arr)
    throw InputError(fmt::format("{}: '{}' must be an array of tables ([[{}]])", file, kind, kind));
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = (*arr)[i].as_table();
    if (!t) throw InputError(fmt::format("{}: {} #{} is not a table", file, kind, i + 1));
    fn(RowReader(*t, file, kind, i));
  }
}

}  // namespace loom::perf
