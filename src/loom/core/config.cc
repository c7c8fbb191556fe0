#include "loom/core/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "loom/core/error.h"

namespace loom {
namespace {

const char* type_name(const ConfigScalar& v) {
  switch (v.index()) {
    case 0:
      return "a boolean";
    case 1:
      return "an integer";
    case 2:
      return "a number";
    default:
      return "a string";
  }
}

std::optional<ConfigScalar> scalar_of(const toml::node& node) {
  if (auto b = node.as_boolean()) return ConfigScalar(b->get());
  if (auto i = node.as_integer()) return ConfigScalar(int64_t(i->get()));
  if (auto d = node.as_floating_point()) return ConfigScalar(d->get());
  if (auto s = node.as_string()) return ConfigScalar(s->get());
  return std::nullopt;
}

std::string location(const std::string& name, const toml::node& node) {
  return fmt::format("{}:{}", name, node.source().begin.line);
}

// `prefix` is the dotted path of `table`, nullptr at the top: an empty key part ("" = 1, or
// the table [""]) is a part like any other, so the flat key "" + ".k" = ".k" written back by
// canonical_text() ("".k) reads back as the same key.
void flatten(const toml::table& table, const std::string* prefix, const std::string& name,
             std::map<std::string, ConfigValue>& out) {
  for (const auto& [k, node] : table) {
    std::string key = prefix ? *prefix + "." + std::string(k.str()) : std::string(k.str());
    if (const auto* sub = node.as_table()) {
      flatten(*sub, &key, name, out);
      continue;
    }
    ConfigValue value;
    value.where = location(name, node);
    // An array of tables ([[layer]] ...) flattens as tables named by position: "layer.0.type".
    if (const auto* arr = node.as_array(); arr && !arr->empty() && arr->is_array_of_tables()) {
      for (size_t i = 0; i < arr->size(); ++i) {
        const std::string item = key + "." + std::to_string(i);
        flatten(*(*arr)[i].as_table(), &item, name, out);
      }
      continue;
    }
    if (const auto* arr = node.as_array()) {
      value.is_array = true;
      for (const auto& item : *arr) {
        auto s = scalar_of(item);
        if (!s)
          throw ConfigError(
              fmt::format("{}: key '{}': arrays may hold only numbers, strings and "
                          "booleans",
                          value.where, key));
        value.array.push_back(*s);
      }
    } else if (auto s = scalar_of(node)) {
      value.value = *s;
    } else {
      throw ConfigError(fmt::format("{}: key '{}': unsupported value type", value.where, key));
    }
    out[key] = std::move(value);
  }
}

bool bare_key_part(const std::string& part) {
  return !part.empty() && part.find_first_not_of(
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                              "0123456789_-") == std::string::npos;
}

}  // namespace

std::string toml_quoted(const std::string& s) {
  // A TOML basic string: quote, backslash and control characters escaped, so the text parses
  // back to the same bytes (a path with a quote would otherwise break config.toml, the config
  // saved in a checkpoint and the config hash compared across ranks).
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\u{:04X}", unsigned(c));
        else
          out += ch;
    }
  }
  return out + "\"";
}

std::string toml_key(const std::string& dotted) {
  // Each dot-separated part bare when it may be ("optim.lr"), else quoted ("a.\"b c\"").
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? dot : dot - start);
    out += bare_key_part(part) ? part : toml_quoted(part);
    if (dot == std::string::npos) break;
    out += '.';
    start = dot + 1;
  }
  return out;
}

std::string config_scalar_text(const ConfigScalar& v) {
  switch (v.index()) {
    case 0:
      return std::get<bool>(v) ? "true" : "false";
    case 1:
      return std::to_string(std::get<int64_t>(v));
    case 2: {
      // Shortest round-trip form; "1" or "-0" would read back as an integer, so keep a ".0".
      std::string t = fmt::format("{}", std::get<double>(v));
      if (t.find_first_not_of("-0123456789") == std::string::npos) t += ".0";
      return t;
    }
    default:
      return toml_quoted(std::get<std::string>(v));
  }
}

std::map<std::string, ConfigValue> toml_values(const std::string& text, const std::string& name) {
  std::map<std::string, ConfigValue> values;
  try {
    toml::table table = toml::parse(text, name);
    flatten(table, nullptr, name, values);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}: {}", name, e.source().begin.line, e.description()));
  }
  return values;
}

Config Config::from_string(const std::string& text, const std::string& name) {
  Config cfg;
  cfg.values_ = toml_values(text, name);
  return cfg;
}

Config Config::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open config file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_string(ss.str(), path);
}

void Config::set(const std::string& key, ConfigScalar value, const std::string& where) {
  ConfigValue v;
  v.value = std::move(value);
  v.where = where;
  values_[key] = std::move(v);
}

void Config::set_override(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(fmt::format("--set '{}': expected key=value", assignment));
  std::string key = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  auto trim = [](std::string& s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
  };
  trim(key);
  trim(text);
  const std::string where = "--set " + key;
  try {
    toml::table t = toml::parse("v = " + text);
    std::map<std::string, ConfigValue> flat;
    flatten(t, nullptr, where, flat);
    ConfigValue v = flat.at("v");
    v.where = where;
    values_[key] = std::move(v);
  } catch (const toml::parse_error&) {
    set(key, text, where);  // a bare word: codec=onebit
  }
}

const ConfigValue* Config::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

std::string Config::where(const std::string& key) const {
  const ConfigValue* v = find(key);
  return v ? v->where : "default";
}

bool Config::get_bool(const std::string& key, bool def) const {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (v->is_array || v->value.index() != 0)
    throw ConfigError(fmt::format("{}: key '{}': expected a boolean, got {}", v->where, key,
                                  v->is_array ? "an array" : type_name(v->value)));
  return std::get<bool>(v->value);
}

int64_t Config::get_int(const std::string& key, int64_t def) const {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (!v->is_array && v->value.index() == 1) return std::get<int64_t>(v->value);
  if (!v->is_array && v->value.index() == 2) {
    double d = std::get<double>(v->value);
    if (std::nearbyint(d) == d && std::fabs(d) < 9e15) return int64_t(d);
  }
  throw ConfigError(fmt::format("{}: key '{}': expected an integer, got {}", v->where, key,
                                v->is_array ? "an array" : config_scalar_text(v->value)));
}

int64_t Config::get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi) const {
  int64_t x = get_int(key, def);
  if (x < lo || x > hi)
    throw ConfigError(
        fmt::format("{}: key '{}': {} is out of range [{}, {}]", where(key), key, x, lo, hi));
  return x;
}

double Config::get_double(const std::string& key, double def) const {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (!v->is_array && v->value.index() == 2) return std::get<double>(v->value);
  if (!v->is_array && v->value.index() == 1) return double(std::get<int64_t>(v->value));
  throw ConfigError(fmt::format("{}: key '{}': expected a number, got {}", v->where, key,
                                v->is_array ? "an array" : config_scalar_text(v->value)));
}

double Config::get_double(const std::string& key, double def, double lo, double hi) const {
  double x = get_double(key, def);
  if (!(x >= lo && x <= hi))
    throw ConfigError(
        fmt::format("{}: key '{}': {} is out of range [{}, {}]", where(key), key, x, lo, hi));
  return x;
}

std::string Config::get_string(const std::string& key, const std::string& def) const {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (v->is_array || v->value.index() != 3)
    throw ConfigError(fmt::format("{}: key '{}': expected a string, got {}", v->where, key,
                                  v->is_array ? "an array" : config_scalar_text(v->value)));
  return std::get<std::string>(v->value);
}

std::vector<int64_t> Config::get_int_list(const std::string& key,
                                          const std::vector<int64_t>& def) const {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (!v->is_array) return {get_int(key, 0)};
  std::vector<int64_t> out;
  for (const auto& item : v->array) {
    if (item.index() != 1)
      throw ConfigError(fmt::format("{}: key '{}': expected an array of integers, found {}",
                                    v->where, key, config_scalar_text(item)));
    out.push_back(std::get<int64_t>(item));
  }
  return out;
}

std::string Config::get_choice(const std::string& key, const std::string& def,
                               const std::vector<std::string>& choices) const {
  std::string s = get_string(key, def);
  if (std::find(choices.begin(), choices.end(), s) == choices.end())
    throw ConfigError(fmt::format("{}: key '{}': unknown value \"{}\" (one of: {})", where(key),
                                  key, s, fmt::join(choices, ", ")));
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

void Config::check_known(const std::vector<ConfigKeySpec>& known) const {
  for (const auto& [key, value] : values_) {
    bool ok = false;
    for (const auto& spec : known) {
      const std::string& k = spec.key;
      if (k == key || (!k.empty() && k.back() == '.' && key.rfind(k, 0) == 0)) {
        ok = true;
        break;
      }
    }
    if (ok) continue;
    std::string best;
    size_t best_d = 4;
    for (const auto& spec : known) {
      size_t d = edit_distance(key, spec.key);
      if (d < best_d) best_d = d, best = spec.key;
    }
    throw ConfigError(fmt::format("{}: unknown config key '{}'{}", value.where, key,
                                  best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best)));
  }
}

std::string config_value_text(const ConfigValue& v) {
  if (!v.is_array) return config_scalar_text(v.value);
  std::string out = "[";
  for (size_t i = 0; i < v.array.size(); ++i)
    out += (i ? ", " : "") + config_scalar_text(v.array[i]);
  return out + "]";
}

std::string Config::canonical_text() const {
  // A key that is also the start of others (`sync = "bmuf"` with `sync.bucket_kib`, set by
  // --set) cannot be a value and a table in TOML: the longer keys are written as one quoted
  // key each ("sync.bucket_kib"), which flattens back to the same dotted name.
  auto under_a_value = [this](const std::string& key) {
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
      if (values_.count(key.substr(0, dot))) return true;
    return false;
  };
  std::string out;
  for (const auto& [key, v] : values_)
    out += (under_a_value(key) ? toml_quoted(key) : toml_key(key)) + " = " + config_value_text(v) +
           "\n";
  return out;
}

}  // namespace loom
