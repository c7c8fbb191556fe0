// `loom models list` and `loom models show NAME`: the networks of the zoo (nn/graph/model_zoo.h),
// and any of them as a graph file to copy and edit.
#include <fmt/format.h>

#include <fstream>

#include "loom/cli/commands.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/layer_factory.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::cli::models_command {
namespace {

struct ShowArgs {
  std::string name;
  std::vector<std::string> sets;
  std::vector<int64_t> input = {1, 28, 28};
  int classes = 10;
  std::string output;
  bool summary = false;
};

Config model_config(const std::string& name, const std::vector<std::string>& sets) {
  Config cfg;
  cfg.set("model", name, "loom models");
  for (const auto& s : sets) cfg.set_override(s);
  return cfg;
}

void show(const ShowArgs& a) {
  const Config cfg = model_config(a.name, a.sets);
  const nn::Shape input(a.input.begin(), a.input.end());
  const nn::GraphSpec graph = nn::model_graph(plan::read_model_spec(cfg), input, a.classes);
  // Built once, so that what is written is a graph that builds on this input.
  const auto model = nn::build_model(plan::read_model_spec(cfg), cpu_backend(), input, a.classes);
  if (a.summary) {
    fmt::print("{}\n", model->summary());
    return;
  }
  const std::string text = nn::graph_to_toml(
      graph, fmt::format("loom models show {}: {} layers, {} parameters on input {}", a.name,
                         model->layers().size(), model->num_params(), nn::shape_text(input)));
  if (a.output.empty()) {
    fmt::print("{}", text);
    return;
  }
  if (std::ifstream(a.output))
    throw InputError(
        fmt::format("{}: exists; loom models show does not overwrite a file", a.output));
  std::ofstream out(a.output, std::ios::binary);
  out << text;
  if (!out.flush()) throw InputError(fmt::format("{}: cannot write", a.output));
  fmt::print("wrote {}\n", a.output);
}

void setup(CLI::App& app) {
  CLI::App* list = app.add_subcommand("list",
                                      "the zoo's networks and the layer types a graph "
                                      "file may use");
  list->callback([] {
    fmt::print("models (model = \"NAME\", or a graph file: model = \"net.toml\")\n");
    for (const auto& n : nn::builtin_model_names()) fmt::print("  {}\n", n);
    fmt::print("\nlayer types ([[layer]] type = \"...\")\n");
    for (const auto& t : nn::layer_types())
      fmt::print("  {:<16} {:<48} {}\n", t.type, t.takes.empty() ? "-" : t.takes, t.doc);
  });

  auto a = std::make_shared<ShowArgs>();
  CLI::App* show_cmd =
      app.add_subcommand("show", "write a network of the zoo as a graph file ([[layer]] tables)");
  show_cmd->add_option("name", a->name, "a name of `loom models list`, or a graph file")
      ->required();
  show_cmd->add_option("--set", a->sets,
                       "a parameter of the built-in graphs: --set mlp.hidden=[512]");
  show_cmd->add_option("--input", a->input, "per-sample input shape (default 1 28 28)")
      ->expected(1, 4);
  show_cmd->add_option("--classes", a->classes, "classes of the data (default 10)")
      ->check(CLI::Range(1, 1 << 20));
  show_cmd->add_option("-o,--output", a->output, "write to this file (never overwritten)");
  show_cmd->add_flag("--summary", a->summary,
                     "print the layers with shapes, parameters and FLOPs instead");
  show_cmd->callback([a] { show(*a); });
}

CommandRegistrar reg("models list", setup);

}  // namespace
}  // namespace loom::cli::models_command
