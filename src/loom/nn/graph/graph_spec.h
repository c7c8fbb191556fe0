// A model graph as data: the layer tables of a TOML file (`[[layer]]` with `type`, optional
// `name` and `input`/`inputs`, and the type's parameters), before any layer is built. The same
// description comes from a graph file, from the `[[layer]]` tables of a run config, from a
// built-in network of the zoo (model_zoo.h) or from an imported ONNX file, and writes back out
// as TOML (`loom models show NAME`).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "loom/core/config_value.h"

namespace loom::nn {

struct LayerSpec {
  std::string type;                 // "conv2d", "linear", ... (layer_factory.h lists them)
  std::string name;                 // empty: named automatically (graph_builder.h)
  std::vector<std::string> inputs;  // empty: the layer before it, or the model's input
  std::map<std::string, ConfigValue> params;  // everything else in the table
  std::string where;                          // "file.toml:12" of the table's `type`
  // Initial values in the layer's own order (an imported model's weights); empty: the layer
  // draws its parameters and sets its state as it does by itself.
  std::vector<float> init_params, init_state;
};

struct GraphSpec {
  std::string source;  // file name or "built-in mlp", for errors
  std::vector<LayerSpec> layers;
};

// The `<prefix>.N.*` keys of a TOML file's flattened values (what Config makes of `[[layer]]`
// tables: Config::values()), in order. Throws ConfigError naming the key's line for a table
// without `type`, a gap in the numbering, an `input` that is not a string or `inputs` that is not
// an array of strings.
GraphSpec graph_from_values(const std::map<std::string, ConfigValue>& values,
                            const std::string& prefix = "layer");

// A graph file: TOML holding only `[[layer]]` tables. Throws InputError if unreadable,
// ConfigError for bad syntax, a key other than `layer`, or a bad table.
GraphSpec graph_from_file(const std::string& path);
GraphSpec graph_from_string(const std::string& text, const std::string& name);

// The graph as a TOML file of `[[layer]]` tables that graph_from_string reads back to the same
// layers, names, inputs and parameters.
std::string graph_to_toml(const GraphSpec& graph, const std::string& title = "");

// Typed reads of one layer table's parameters. Each read marks the key used; check_all_used()
// then names any parameter the layer type does not take.
class LayerArgs {
 public:
  LayerArgs(const LayerSpec& spec, std::string layer_name);
  const std::string& layer_name() const { return name_; }
  bool has(const std::string& key) const { return spec_.params.count(key) != 0; }

  int64_t get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  // An integer or a list of two ([h, w]); def when absent.
  std::array<int64_t, 2> get_pair(const std::string& key, std::array<int64_t, 2> def, int64_t lo,
                                  int64_t hi);
  double get_double(const std::string& key, double def, double lo, double hi);
  bool get_bool(const std::string& key, bool def);
  // A required integer parameter.
  int64_t require_int(const std::string& key, int64_t lo, int64_t hi);
  // A required non-empty list of integers, each in [lo, hi].
  std::vector<int64_t> require_ints(const std::string& key, int64_t lo, int64_t hi);
  // `takes`: the parameters the type has, for the message ("out, bias").
  void check_all_used(const std::string& takes) const;

  // "layer 'name' (type) at file:12: what".
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const ConfigValue* find(const std::string& key);
  const LayerSpec& spec_;
  std::string name_;
  std::vector<std::string> used_;
};

}  // namespace loom::nn
