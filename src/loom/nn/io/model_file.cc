#include "loom/nn/io/model_file.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/nn/graph/graph_builder.h"

namespace loom::nn {

namespace {

constexpr const char* kFormatName = "loom.model";

const std::string& need_metadata(const SafetensorsFile& f, const std::string& key) {
  const auto it = f.metadata().find(key);
  if (it == f.metadata().end())
    throw InputError(fmt::format("{}: no \"{}\" in the metadata: not a model file written by loom",
                                 f.source(), key));
  return it->second;
}

// Appends the tensors `specs` make of `count` floats at `offset` of one buffer.
void add_tensors(std::vector<ModelTensor>& out, const std::string& layer,
                 const std::vector<TensorSpec>& specs, bool state, int64_t offset, int64_t count) {
  int64_t at = offset;
  for (const TensorSpec& s : specs) {
    const int64_t n = numel(s.shape);
    out.push_back({layer + "." + s.name, s.shape, state, at, n});
    at += n;
  }
  LOOM_CHECK(at == offset + count, "layer '{}': its {} tensors hold {} floats, not its {}", layer,
             state ? "state" : "parameter", at - offset, count);
}

}  // namespace

std::vector<ModelTensor> model_tensors(const Model& model) {
  std::vector<ModelTensor> out;
  std::vector<int64_t> param_offset(model.layers().size(), -1);
  for (const ParamRange& r : model.param_ranges()) param_offset[size_t(r.layer)] = r.offset;
  int64_t state_offset = 0;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    const std::string& name = model.layer_name(int(i));
    if (layer.num_params() > 0)
      add_tensors(out, name, layer.param_tensors(), false, param_offset[i], layer.num_params());
    if (layer.num_state() > 0) {
      add_tensors(out, name, layer.state_tensors(), true, state_offset, layer.num_state());
      state_offset += layer.num_state();
    }
  }
  return out;
}

std::vector<uint8_t> model_file_bytes(const Model& model, const GraphSpec& graph,
                                      std::span<const float> params, std::span<const float> state,
                                      const std::map<std::string, std::string>& extra) {
  LOOM_CHECK_EQ(int64_t(params.size()), model.num_params());
  LOOM_CHECK_EQ(int64_t(state.size()), model.num_state());
  std::vector<SafetensorsView> views;
  for (const ModelTensor& t : model_tensors(model))
    views.push_back({t.name, t.shape, (t.state ? state.data() : params.data()) + t.offset});
  std::map<std::string, std::string> metadata = extra;
  metadata["format"] = kFormatName;
  metadata[kFormatVersionKey] = std::to_string(kModelFileVersion);
  metadata["graph"] = graph_to_toml(graph);
  metadata["input_shape"] = nlohmann::json(model.input_shape()).dump();
  metadata["num_classes"] = std::to_string(model.num_classes());
  return safetensors_bytes(views, metadata);
}

ModelFile read_model_file(const std::string& path) {
  ModelFile m{SafetensorsFile::read(path), {}, {}, 0};
  const SafetensorsFile& f = m.file;
  const std::string& version = need_metadata(f, kFormatVersionKey);
  int64_t v = -1;
  try {
    size_t used = 0;
    v = std::stoll(version, &used);
    if (used != version.size()) v = -1;
  } catch (const std::exception&) {
  }
  if (v < 1)
    throw InputError(fmt::format("{}: metadata \"{}\" is \"{}\", not a version number >= 1",
                                 f.source(), kFormatVersionKey, version));
  if (v > kModelFileVersion)
    throw InputError(fmt::format(
        "{}: model file format version {}; this build reads version {} (the file was written "
        "by a newer loom)",
        f.source(), v, kModelFileVersion));
  const std::string& format = need_metadata(f, "format");
  if (format != kFormatName)
    throw InputError(fmt::format("{}: metadata \"format\" is \"{}\", not \"{}\"", f.source(),
                                 format, kFormatName));
  try {
    m.graph = graph_from_string(need_metadata(f, "graph"), path + " (metadata \"graph\")");
  } catch (const ConfigError& e) {
    throw InputError(fmt::format("{}: the model graph in its metadata: {}", path, e.what()));
  }
  const nlohmann::json shape =
      nlohmann::json::parse(need_metadata(f, "input_shape"), nullptr, false);
  bool shape_ok = shape.is_array() && !shape.empty();
  if (shape_ok)
    for (const auto& d : shape) {
      shape_ok = shape_ok && d.is_number_unsigned() && d.get<uint64_t>() >= 1 &&
                 d.get<uint64_t>() <= (uint64_t(1) << 31);
      if (shape_ok) m.input_shape.push_back(d.get<int64_t>());
    }
  if (!shape_ok)
    throw InputError(
        fmt::format("{}: metadata \"input_shape\" is \"{}\", not a shape such as "
                    "[1, 28, 28]",
                    path, need_metadata(f, "input_shape")));
  const std::string& classes = need_metadata(f, "num_classes");
  try {
    size_t used = 0;
    const long long c = std::stoll(classes, &used);
    if (used == classes.size() && c >= 1 && c <= std::numeric_limits<int>::max())
      m.num_classes = int(c);
  } catch (const std::exception&) {
  }
  if (m.num_classes == 0)
    throw InputError(
        fmt::format("{}: metadata \"num_classes\" is \"{}\", not a count >= 1", path, classes));
  return m;
}

std::unique_ptr<Model> build_model_from_file(const ModelFile& f, Backend& backend) {
  std::unique_ptr<Model> model;
  try {
    std::vector<Node> nodes = build_nodes(f.graph, f.input_shape);
    // The graph and input shape in the metadata decide the buffers the model allocates: they
    // must add up to the values the file holds, checked before anything that size is allocated
    // (an input shape of [2147483648, 2147483648] makes a first linear layer of 2^62 weights).
    int64_t want = 0, have = 0;
    for (const Node& n : nodes) want += n.layer->num_params() + n.layer->num_state();
    for (const SafetensorsTensor& t : f.file.tensors()) have += t.numel();
    if (want != have)
      throw InputError(fmt::format(
          "{}: the graph and input_shape {} in its metadata make a model of {} parameter and "
          "state values; its tensors hold {}",
          f.file.source(), shape_text(f.input_shape), want, have));
    model = std::make_unique<Model>(backend, f.input_shape, f.num_classes, std::move(nodes));
  } catch (const ConfigError& e) {
    throw InputError(fmt::format("{}: the model graph in its metadata does not build: {}",
                                 f.file.source(), e.what()));
  }
  load_model_tensors(*model, f.file);
  return model;
}

void load_model_tensors(Model& model, const SafetensorsFile& file) {
  std::set<std::string> used;
  for (const ModelTensor& t : model_tensors(model)) {
    const SafetensorsTensor* st = file.find(t.name);
    if (!st)
      throw InputError(fmt::format("{}: no tensor '{}' (the model's layer '{}' needs {})",
                                   file.source(), t.name, t.name.substr(0, t.name.rfind('.')),
                                   shape_text(t.shape)));
    if (st->shape != t.shape)
      throw InputError(fmt::format("{}: tensor '{}' has shape {}; the model needs {}",
                                   file.source(), t.name, shape_text(st->shape),
                                   shape_text(t.shape)));
    const std::vector<float> v = file.f32(*st);
    // Trained weights are finite (training stops on NaN/Inf), so a NaN here is a damaged or
    // foreign file, and a model built on it would answer NaN for every input.
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("{}: tensor '{}' holds {} at element {}", file.source(),
                                     t.name, std::isnan(v[i]) ? "NaN" : "Inf", i));
    if (!v.empty())
      model.backend().copy_to_device((t.state ? model.state() : model.params()) + t.offset,
                                     v.data(), v.size() * sizeof(float));
    used.insert(t.name);
  }
  for (const SafetensorsTensor& t : file.tensors())
    if (!used.count(t.name))
      throw InputError(fmt::format("{}: tensor '{}' is not a parameter or state of the model",
                                   file.source(), t.name));
}

}  // namespace loom::nn
