// `loom export RUN --weights [OUT] [--onnx FILE] [--npy DIR] [--force]`: a trained run's model (its
// final model.safetensors, or a checkpoint) in the formats other tools read. RUN is what
// train::load_trained_model takes: a run directory, a checkpoint directory or a model file.
//
// Each format is one target: an option that asks for it, a default output path, and a function
// that writes it from the loaded model. The command loads the model once, refuses every output
// that exists (without --force) before writing any, then writes each target.
#include <fmt/format.h>

#include <filesystem>
#include <functional>

#include "loom/cli/commands.h"
#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/data/formats/npy.h"
#include "loom/nn/io/model_file.h"
#include "loom/nn/io/onnx_export.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/trained_model.h"

namespace loom::cli::export_command {
namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string run;
  bool force = false;
  CLI::Option* weights_opt = nullptr;
  std::string weights;  // --weights [OUT]
  std::string npy;      // --npy DIR
  std::string onnx;     // --onnx FILE
};

// The model's parameters and state in host memory.
struct HostWeights {
  std::vector<float> params, state;
};

HostWeights host_weights(nn::Model& model) {
  HostWeights w;
  w.params.resize(size_t(model.num_params()));
  w.state.resize(size_t(model.num_state()));
  if (!w.params.empty())
    model.backend().copy_to_host(w.params.data(), model.params(), w.params.size() * sizeof(float));
  if (!w.state.empty())
    model.backend().copy_to_host(w.state.data(), model.state(), w.state.size() * sizeof(float));
  return w;
}

// "runs/mlp" -> "mlp"; a checkpoint "runs/mlp/checkpoints/step-000000000120" ->
// "mlp-step-000000000120"; a model file "a/b.safetensors" -> "b".
std::string export_name(const std::string& run, const train::TrainedModel& m) {
  fs::path p = fs::path(run).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (!m.from_checkpoint) return fs::is_regular_file(p) ? p.stem().string() : p.filename().string();
  const fs::path dir = fs::path(m.weights).parent_path();  // step-N
  const fs::path run_dir = dir.parent_path().parent_path();
  const std::string step = dir.filename().string();
  const std::string name = run_dir.filename().string();
  return name.empty() || name == "." ? step : name + "-" + step;
}

// One output the command writes.
struct Target {
  std::string what;  // "--weights"
  std::string path;
  std::function<void(const std::string& path)> write;
};

void write_weights(const train::TrainedModel& m, const HostWeights& w, const std::string& path) {
  core::write_file_atomically(
      path,
      nn::model_file_bytes(*m.model, m.graph, w.params, w.state,
                           train::trained_model_metadata(m.steps, m.input_normalisation, m.loss)));
}

// One NumPy file per tensor, DIR/<name>.npy, for tools that read NumPy and not safetensors.
void write_npy_dir(const train::TrainedModel& m, const HostWeights& w, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw InputError(fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
  for (const nn::ModelTensor& t : nn::model_tensors(*m.model))
    data::write_npy((fs::path(dir) / (t.name + ".npy")).string(), data::NpyDtype::kFloat32, t.shape,
                    (t.state ? w.state.data() : w.params.data()) + t.offset);
}

void run_export(const ExportArgs& args) {
  const bool want_weights = args.weights_opt->count() > 0;
  if (!want_weights && args.npy.empty() && args.onnx.empty())
    throw InputError(
        "loom export: nothing to export; ask for a format: --weights [OUT] (safetensors), "
        "--onnx FILE, --npy DIR");
  if (!args.onnx.empty() && !nn::onnx_export_built())
    throw ConfigError("loom export --onnx: this loom was built without ONNX (libonnx-dev)");
  train::TrainedModel m = train::load_trained_model(args.run, cpu_backend());
  const HostWeights w = host_weights(*m.model);
  std::vector<Target> targets;
  if (want_weights)
    targets.push_back(
        {"--weights",
         args.weights.empty() ? export_name(args.run, m) + ".safetensors" : args.weights,
         [&](const std::string& p) { write_weights(m, w, p); }});
  if (!args.npy.empty())
    targets.push_back({"--npy", args.npy, [&](const std::string& p) { write_npy_dir(m, w, p); }});
  if (!args.onnx.empty())
    targets.push_back({"--onnx", args.onnx, [&](const std::string& p) {
                         nn::OnnxExportOptions o;
                         o.doc = fmt::format("trained by loom: {}", m.weights);
                         nn::export_onnx(*m.model, w.params.data(),
                                         w.state.empty() ? nullptr : w.state.data(), p, o);
                       }});
  std::vector<std::pair<std::string, std::string>> outputs;  // path, flag
  for (const Target& t : targets) outputs.emplace_back(t.path, t.what);
  // A model over ONNX's inline limit writes a second file beside the .onnx one.
  if (!args.onnx.empty() && nn::onnx_needs_external_data(*m.model))
    outputs.emplace_back(nn::onnx_external_data_path(args.onnx), "--onnx's external data");
  for (const auto& [path, what] : outputs) {
    std::error_code ec;
    if (fs::exists(path, ec) && !args.force)
      throw InputError(
          fmt::format("{}: already exists ({}); loom export does not overwrite it "
                      "without --force",
                      path, what));
  }
  for (const Target& t : targets) {
    t.write(t.path);
    fmt::print("loom: exported {} ({}{}) to {}\n", m.weights,
               m.steps >= 0 ? fmt::format("{} steps, ", m.steps) : "",
               fmt::format("{} parameters", m.model->num_params()), t.path);
  }
}

CommandRegistrar reg("export", [](CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "write a trained run's model in formats other tools read (safetensors, ONNX, NumPy)");
  cmd->add_option("run", args->run,
                  "a run directory (its model.safetensors, else its newest checkpoint), a "
                  "checkpoint directory (checkpoints/step-N) or a model file")
      ->required();
  args->weights_opt =
      cmd->add_option("--weights", args->weights,
                      "the weights as safetensors, with the graph in the metadata (default OUT: "
                      "<run name>.safetensors, or <run name>-step-N.safetensors for a checkpoint)")
          ->expected(0, 1);
  cmd->add_option("--onnx", args->onnx,
                  "the model as ONNX (opset 13) for onnxruntime and other runtimes");
  cmd->add_option("--npy", args->npy, "one NumPy file per tensor in DIR (<layer>.<tensor>.npy)");
  cmd->add_flag("--force", args->force, "replace outputs that exist");
  cmd->callback([args] { run_export(*args); });
});

}  // namespace
}  // namespace loom::cli::export_command
