// `loom bench calibrate`: measures this machine for the performance model (perf/
// machine_probe.h) and prints one line per figure plus the JSON lines the model reads back
// (`loom scale --calibration FILE`, `loom advise --calibration FILE`). Under mpirun the MPI
// transport's allreduce is measured too; rank 0 prints and writes.
#include <fmt/format.h>

#include <fstream>
#include <memory>

#include "loom/cli/commands.h"
#include "loom/cli/perf_options.h"
#include "loom/comm/launcher_env.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/measure/machine_identity.h"
#include "loom/measure/machine_probe.h"
#include "loom/perf/calibration.h"
#include "loom/plan/model_reader.h"

namespace loom::cli::bench_calibrate_command {
namespace {

struct Args {
  std::string out, model, data_dir;
  bool quick = false;
};

// A readable line for one JSON result.
std::string describe(const nlohmann::json& j) {
  const std::string b = j.at("bench");
  if (b == "gemm")
    return fmt::format("gemm        {} worker(s) x {} thread(s): {:.1f} GFLOP/s per worker ({})",
                       int(j["workers"]), int(j["threads"]), double(j["gflops"]),
                       std::string(j["library"]));
  if (b == "membw")
    return fmt::format("membw       {:<6} {} thread(s), {} MiB: {:.2f} GB/s read+written",
                       std::string(j["op"]), int(j["threads"]), size_t(j["bytes"]) >> 20,
                       double(j["gbs"]));
  if (b == "elementwise")
    return fmt::format("elementwise {} thread(s): {:.2f} GB/s read+written", int(j["threads"]),
                       double(j["gbs"]));
  if (b == "allreduce" && j.value("busy", false))
    return fmt::format(
        "allreduce   {} {} ranks, {} B beside busy compute: {:.1f} us (takes {:.0f}% of the "
        "GEMM rate)",
        std::string(j["transport"]), int(j["ranks"]), size_t(j["bytes"]), double(j["time_us"]),
        100 * double(j["compute_steal"]));
  if (b == "allreduce")
    return fmt::format("allreduce   {} {} ranks, {} B: {:.1f} us", std::string(j["transport"]),
                       int(j["ranks"]), size_t(j["bytes"]), double(j["time_us"]));
  if (b == "codec")
    return fmt::format("codec       {}: encode {:.2f} GB/s, decode {:.2f} GB/s (fp32 in)",
                       std::string(j["codec"]), double(j["encode_gbs"]), double(j["decode_gbs"]));
  if (b == "loader") return fmt::format("loader      {:.0f} samples/s", double(j["samples_per_s"]));
  if (b == "machine")
    return fmt::format("machine     {}, transport {}, {} ranks", std::string(j["cpu"]),
                       std::string(j["transport"]), int(j["world_size"]));
  if (b == "host") return fmt::format("host        {} cores", int(j["cores"]));
  return j.dump();
}

void run(const Args& a) {
  measure::ProbeOptions o;
  if (!a.model.empty()) {
    const Config cfg = Config::from_file(a.model);
    if (plan::read_model_spec(cfg).model != "mlp")
      throw ConfigError(
          fmt::format("{}: bench calibrate measures the MLP's step shapes; "
                      "model '{}' is not supported yet",
                      a.model, plan::read_model_spec(cfg).model));
    o = mlp_probe_options(cfg);
  }
  o.quick = a.quick;
  o.data_dir = a.data_dir;
  std::unique_ptr<comm::World> mpi;
  if (comm::launched_by_mpi()) mpi = comm::create_world("mpi", 0, comm::CommOptions{});
  const bool lead = !mpi || mpi->local(0).rank() == 0;
  std::ofstream file;
  if (lead && !a.out.empty()) {
    file.open(a.out);
    if (!file) throw InputError(fmt::format("{}: cannot write the calibration file", a.out));
  }
  if (lead)
    fmt::print("# loom bench calibrate: MLP {} batch {}{}\n", fmt::join(o.widths, "-"), o.batch,
               mpi ? "" : " (run under mpirun -np 2 to measure the MPI transport as well)");
  const auto emit = [&](const nlohmann::json& line) {
    nlohmann::json j = line;
    j[kFormatVersionKey] = perf::kCalibrationFormatVersion;
    fmt::print("  {}\n{}\n", describe(j), j.dump());
    std::fflush(stdout);
    if (file) file << j.dump() << '\n' << std::flush;
  };
  // The machine these figures belong to: the thread transport is measured among 2 ranks
  // (machine_probe.cc), MPI among the launched ones.
  if (lead) {
    const std::string cpu = measure::cpu_model();
    emit(perf::machine_line(cpu, "thread", 2));
    if (mpi) emit(perf::machine_line(cpu, "mpi", mpi->size()));
  }
  measure::probe_machine(o, mpi.get(), emit);
  if (lead && !a.out.empty()) fmt::print("# written: {}\n", a.out);
}

CommandRegistrar reg("bench calibrate", [](CLI::App& parent) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = parent.add_subcommand(
      "calibrate",
      "measure this machine (GEMM, memory, allreduce, codecs, loader) for the "
      "performance model");
  cmd->add_option("-o,--output", a->out, "write the JSON lines here (for --calibration FILE)");
  cmd->add_option("--model", a->model,
                  "loom config whose MLP shapes to measure, between its own data's inputs and "
                  "outputs (default: 784-1024-1024-10, batch 128)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--data-dir", a->data_dir, "Fashion-MNIST for the loader rate");
  cmd->add_flag("--quick", a->quick, "fewer repetitions (a first look; noisier)");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loom::cli::bench_calibrate_command
