#include "loom/nn/graph/graph_spec.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "loom/core/error.h"

namespace loom::nn {

namespace {

const char* const kReserved[] = {"type", "name", "input", "inputs"};

bool is_reserved(const std::string& key) {
  return std::find(std::begin(kReserved), std::end(kReserved), key) != std::end(kReserved);
}

std::string scalar_string(const ConfigValue& v, const std::string& key) {
  if (v.is_array || v.value.index() != 3)
    throw ConfigError(fmt::format("{}: key '{}' must be a string", v.where, key));
  return std::get<std::string>(v.value);
}

}  // namespace

GraphSpec graph_from_values(const std::map<std::string, ConfigValue>& values,
                            const std::string& prefix) {
  // Group "<prefix>.N.field" keys by N.
  std::map<int64_t, std::map<std::string, const ConfigValue*>> tables;
  const std::string head = prefix + ".";
  for (const auto& [key, value] : values) {
    if (key == prefix)
      throw ConfigError(fmt::format("{}: key '{}' must be an array of tables ([[{}]])", value.where,
                                    key, prefix));
    if (key.compare(0, head.size(), head) != 0) continue;
    const std::string rest = key.substr(head.size());
    const size_t dot = rest.find('.');
    const std::string index = rest.substr(0, dot);
    if (dot == std::string::npos || index.empty() ||
        index.find_first_not_of("0123456789") != std::string::npos || index.size() > 6)
      throw ConfigError(
          fmt::format("{}: key '{}': layers are [[{}]] tables", value.where, key, prefix));
    const std::string field = rest.substr(dot + 1);
    if (field.find('.') != std::string::npos)
      throw ConfigError(
          fmt::format("{}: key '{}': a layer's parameters are plain values, not "
                      "tables",
                      value.where, key));
    tables[std::stoll(index)][field] = &value;
  }
  GraphSpec graph;
  graph.source = "config";
  int64_t expect = 0;
  for (const auto& [index, fields] : tables) {
    const std::string where = fields.begin()->second->where;
    if (index != expect)
      throw ConfigError(
          fmt::format("{}: layer tables must be numbered 0, 1, 2, ...: {}.{} "
                      "follows {}",
                      where, prefix, index, expect - 1));
    ++expect;
    LayerSpec layer;
    auto type = fields.find("type");
    if (type == fields.end())
      throw ConfigError(fmt::format("{}: layer {} has no `type`", where, index));
    layer.type = scalar_string(*type->second, "type");
    layer.where = type->second->where;
    if (auto it = fields.find("name"); it != fields.end())
      layer.name = scalar_string(*it->second, "name");
    const bool has_input = fields.count("input") != 0, has_inputs = fields.count("inputs") != 0;
    if (has_input && has_inputs)
      throw ConfigError(
          fmt::format("{}: layer {} sets both `input` and `inputs`; use one", layer.where, index));
    if (has_input) layer.inputs.push_back(scalar_string(*fields.at("input"), "input"));
    if (has_inputs) {
      const ConfigValue& v = *fields.at("inputs");
      if (!v.is_array || v.array.empty())
        throw ConfigError(
            fmt::format("{}: `inputs` must be a non-empty array of layer names", v.where));
      for (const auto& item : v.array) {
        if (item.index() != 3)
          throw ConfigError(fmt::format("{}: `inputs` must hold layer names (strings)", v.where));
        layer.inputs.push_back(std::get<std::string>(item));
      }
    }
    for (const auto& [field, value] : fields)
      if (!is_reserved(field)) layer.params[field] = *value;
    graph.layers.push_back(std::move(layer));
  }
  return graph;
}

GraphSpec graph_from_string(const std::string& text, const std::string& name) {
  const std::map<std::string, ConfigValue> values = toml_values(text, name);
  for (const auto& [key, value] : values)
    if (key.compare(0, 6, "layer.") != 0 && key != "layer")
      throw ConfigError(
          fmt::format("{}: key '{}': a graph file holds only [[layer]] tables", value.where, key));
  GraphSpec graph = graph_from_values(values, "layer");
  graph.source = name;
  if (graph.layers.empty())
    throw ConfigError(fmt::format("{}: no [[layer]] tables: the graph is empty", name));
  return graph;
}

GraphSpec graph_from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open model graph file", path));
  std::stringstream text;
  text << in.rdbuf();
  return graph_from_string(text.str(), path);
}

std::string graph_to_toml(const GraphSpec& graph, const std::string& title) {
  std::string out;
  if (!title.empty()) out += "# " + title + "\n";
  for (const LayerSpec& l : graph.layers) {
    out += "\n[[layer]]\n";
    out += "type = " + toml_quoted(l.type) + "\n";
    if (!l.name.empty()) out += "name = " + toml_quoted(l.name) + "\n";
    if (l.inputs.size() == 1) out += "input = " + toml_quoted(l.inputs[0]) + "\n";
    if (l.inputs.size() > 1) {
      out += "inputs = [";
      for (size_t i = 0; i < l.inputs.size(); ++i)
        out += (i ? ", " : "") + toml_quoted(l.inputs[i]);
      out += "]\n";
    }
    for (const auto& [key, v] : l.params)
      out += toml_key(key) + " = " + config_value_text(v) + "\n";
  }
  return out;
}

LayerArgs::LayerArgs(const LayerSpec& spec, std::string layer_name)
    : spec_(spec), name_(std::move(layer_name)) {}

const ConfigValue* LayerArgs::find(const std::string& key) {
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return nullptr;
  if (std::find(used_.begin(), used_.end(), key) == used_.end()) used_.push_back(key);
  return &it->second;
}

void LayerArgs::fail(const std::string& what) const {
  throw ConfigError(fmt::format("{}: layer '{}' ({}): {}",
                                spec_.where.empty() ? "model" : spec_.where, name_, spec_.type,
                                what));
}

void LayerArgs::fail(const std::string& key, const std::string& what) const {
  fail(fmt::format("parameter '{}' {}", key, what));
}

int64_t LayerArgs::get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (v->is_array || v->value.index() != 1) fail(key, "must be an integer");
  const int64_t x = std::get<int64_t>(v->value);
  if (x < lo || x > hi) fail(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
  return x;
}

int64_t LayerArgs::require_int(const std::string& key, int64_t lo, int64_t hi) {
  if (!has(key)) fail(key, "is required");
  return get_int(key, 0, lo, hi);
}

std::vector<int64_t> LayerArgs::require_ints(const std::string& key, int64_t lo, int64_t hi) {
  const ConfigValue* v = find(key);
  if (!v) fail(key, "is required");
  std::vector<int64_t> out;
  if (!v->is_array || v->array.empty()) fail(key, "must be a non-empty list of integers");
  for (const auto& x : v->array) {
    if (x.index() != 1) fail(key, "must be a non-empty list of integers");
    out.push_back(std::get<int64_t>(x));
    if (out.back() < lo || out.back() > hi)
      fail(key, fmt::format("value {} is out of range [{}, {}]", out.back(), lo, hi));
  }
  return out;
}

std::array<int64_t, 2> LayerArgs::get_pair(const std::string& key, std::array<int64_t, 2> def,
                                           int64_t lo, int64_t hi) {
  const ConfigValue* v = find(key);
  if (!v) return def;
  std::array<int64_t, 2> out{};
  if (!v->is_array) {
    if (v->value.index() != 1) fail(key, "must be an integer or a list of two");
    out = {std::get<int64_t>(v->value), std::get<int64_t>(v->value)};
  } else {
    if (v->array.size() != 2 || v->array[0].index() != 1 || v->array[1].index() != 1)
      fail(key, "must be an integer or a list of two integers [h, w]");
    out = {std::get<int64_t>(v->array[0]), std::get<int64_t>(v->array[1])};
  }
  for (int64_t x : out)
    if (x < lo || x > hi) fail(key, fmt::format("value {} is out of range [{}, {}]", x, lo, hi));
  return out;
}

double LayerArgs::get_double(const std::string& key, double def, double lo, double hi) {
  const ConfigValue* v = find(key);
  if (!v) return def;
  double x = 0;
  if (!v->is_array && v->value.index() == 2)
    x = std::get<double>(v->value);
  else if (!v->is_array && v->value.index() == 1)
    x = double(std::get<int64_t>(v->value));
  else
    fail(key, "must be a number");
  if (!(x >= lo && x <= hi)) fail(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
  return x;
}

bool LayerArgs::get_bool(const std::string& key, bool def) {
  const ConfigValue* v = find(key);
  if (!v) return def;
  if (v->is_array || v->value.index() != 0) fail(key, "must be true or false");
  return std::get<bool>(v->value);
}

void LayerArgs::check_all_used(const std::string& takes) const {
  for (const auto& entry : spec_.params)
    if (std::find(used_.begin(), used_.end(), entry.first) == used_.end())
      fail(fmt::format("unknown parameter '{}' (a {} layer takes {})", entry.first, spec_.type,
                       takes.empty() ? "no parameters" : takes));
}

}  // namespace loom::nn
