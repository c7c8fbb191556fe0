// `loom bench train`: loom's training samples/s (training loop only), the GEMM ceiling of the
// same step measured in the same run, and the PyTorch peer's figure when python3-torch is
// installed. Prints a table and JSON lines.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "loom/cli/commands.h"
#include "loom/config.h"
#include "loom/core/config.h"
#include "loom/experiments/torch_peer.h"
#include "loom/measure/bench_harness.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cpu/gemm_probe.h"
#include "loom/train/trainer.h"

namespace loom::cli::bench_train_command {
namespace {

struct Args {
  int64_t steps = 400, batch = 128, threads = 1;
  int repeats = 3;  // rounds over the worker counts; the best of each count is reported
  std::vector<int> workers = {1};
  std::string peer = "auto";  // auto (both presets), none, default, tuned
  int peer_epochs = 1;
  std::string json_path;
  std::vector<std::string> sets;
};

void run(const Args& a) {
  measure::BenchOutput out(true, a.json_path);
  fmt::print(
      "loom bench train: MLP 784-1024-1024-10, batch {} per worker, {} thread(s) per "
      "worker, {} steps\n",
      a.batch, a.threads, a.steps);
  // The GEMM ceiling: the step's GEMMs alone, on this thread.
  const auto shapes = cpu::mlp_step_gemms({784, 1024, 1024, 10}, a.batch);
  cpu_backend().set_intra_op_threads(int(a.threads));
  // Every GEMM path built in, so the ratio is taken against the fastest one, not only the one
  // loom happens to use.
  std::vector<std::pair<std::string, double>> ceilings;  // (library, samples/s)
  for (cpu::GemmLibrary lib :
       {cpu::GemmLibrary::kOneDnn, cpu::GemmLibrary::kOneDnnSgemm, cpu::GemmLibrary::kOpenBlas}) {
    if (lib == cpu::GemmLibrary::kOpenBlas && !LOOM_HAVE_OPENBLAS) continue;
    const cpu::GemmProbe probe = cpu::probe_gemm(shapes, lib);
    ceilings.emplace_back(cpu::gemm_library_name(lib), double(a.batch) / probe.seconds);
    out.json({{"bench", "train"},
              {"what", "gemm_ceiling"},
              {"library", ceilings.back().first},
              {"gflops", probe.gflops()},
              {"samples_per_s", ceilings.back().second}});
  }

  // The worker counts run in interleaved rounds (1, 2, 1, 2, ...) and the fastest run of each
  // count is reported: this VM's speed drifts by several percent over tens of seconds, so one
  // run per count can put a slow spell on either side of the scaling ratio.
  const measure::BestOfRounds rounds =
      measure::best_of_rounds(int(a.workers.size()), a.repeats, [&](int k, int round) {
        const int w = a.workers[size_t(k)];
        Config cfg;
        cfg.set("workers", int64_t(w));
        cfg.set("threads", a.threads);
        cfg.set("batch", a.batch);
        cfg.set("max_steps", a.steps);
        cfg.set("epochs", int64_t(1000));
        cfg.set("eval", false);
        cfg.set("progress", std::string("none"));
        cfg.set("log.level", std::string("warn"));
        cfg.set("output.dir", std::string(""));
        for (const auto& s : a.sets) cfg.set_override(s);
        const train::TrainResult r = train::run_training(plan::read_run_plan(cfg));
        double exposed = 0, seconds = 0;
        for (const auto& e : r.epochs) exposed += e.exposed_comm_s, seconds += e.seconds;
        out.json({{"bench", "train"},
                  {"what", "loom"},
                  {"round", round},
                  {"workers", w},
                  {"threads", a.threads},
                  {"batch", a.batch},
                  {"samples_per_s", r.samples_per_s},
                  {"exposed_comm_share", seconds > 0 ? exposed / seconds : 0}});
        return r.samples_per_s;
      });
  std::vector<std::pair<int, double>> loom_rates;  // (workers, best samples/s)
  for (size_t k = 0; k < a.workers.size(); ++k)
    loom_rates.push_back({a.workers[k], rounds.best[k]});
  const std::vector<std::vector<double>>& round_rates = rounds.by_round;
  std::vector<experiments::PeerResult> peers;
  if (a.peer != "none") {
    // Every PyTorch there is (Debian's 1.13, the newest from PyPI where scripts/setup-bench
    // put it), each out of the box and tuned, and compiled where the version has
    // torch.compile: loom is compared with the fastest a user could pick.
    const std::string script = experiments::find_torch_peer();
    for (const std::string& python : experiments::find_pythons(script)) {
      std::string version;  // known once one preset ran
      for (const auto& [tuned, compile] : {std::pair{false, false}, {true, false}, {true, true}}) {
        if ((a.peer == "default" && tuned) || (a.peer == "tuned" && !tuned)) continue;
        if (compile && !experiments::has_torch_compile(version)) continue;
        experiments::PeerResult p = experiments::run_torch_peer(script, {python, tuned, compile},
                                                                int(a.threads), a.peer_epochs);
        if (p.ran) version = p.torch_version;
        out.json({{"bench", "train"},
                  {"what", "peer"},
                  {"label", p.label},
                  {"torch", p.torch_version},
                  {"ran", p.ran},
                  {"samples_per_s", p.samples_per_s},
                  {"test_acc", p.test_acc},
                  {"message", p.ran ? "" : p.message}});
        peers.push_back(p);
      }
    }
  }

  fmt::print("\n{:<72} {:>12} {:>10}\n", "configuration", "samples/s", "ratio");
  const double base = loom_rates.empty() ? 0 : loom_rates.front().second;
  for (const auto& [library, rate] : ceilings)
    fmt::print("{:<72} {:>12.0f} {:>10}\n",
               fmt::format("GEMM ceiling, {} (step's GEMMs only)", library), rate,
               fmt::format("{:.2f}", base / rate));
  for (size_t k = 0; k < loom_rates.size(); ++k) {
    const auto [w, rate] = loom_rates[k];
    // Each round's own ratio too, so the spread of the scaling figure is visible.
    std::string rounds;
    for (size_t i = 0; i < round_rates[k].size() && k > 0; ++i)
      rounds +=
          fmt::format("{}{:.2f}", i ? " " : "  rounds: ", round_rates[k][i] / round_rates[0][i]);
    fmt::print("{:<72} {:>12.0f} {:>10}{}\n",
               fmt::format("loom {} worker{} x {} thread (best of {})", w, w == 1 ? "" : "s",
                           a.threads, a.repeats),
               rate, fmt::format("{:.2f}x", rate / base), rounds);
  }
  double best = 0;
  for (const auto& c : ceilings) best = std::max(best, c.second);
  if (best > 0 && base > 0)
    fmt::print("loom {} worker(s) reach {:.0f}% of the fastest GEMM ceiling\n",
               loom_rates.front().first, 100 * base / best);
  const experiments::PeerResult* fastest = nullptr;
  for (const auto& p : peers) {
    if (p.ran)
      fmt::print("{:<72} {:>12.0f} {:>10}\n", p.label, p.samples_per_s,
                 fmt::format("loom {:.2f}x", base / p.samples_per_s));
    else
      fmt::print("{:<72} {:>12} ({})\n", p.label, "-", p.message);
    if (p.ran && (!fastest || p.samples_per_s > fastest->samples_per_s)) fastest = &p;
  }
  if (fastest && base > 0)
    fmt::print("loom {} worker(s) / the fastest PyTorch ({}): {:.2f}x\n", loom_rates.front().first,
               fastest->label, base / fastest->samples_per_s);
}

CommandRegistrar reg("bench train", [](CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd =
      bench.add_subcommand("train", "training samples/s vs the GEMM ceiling and PyTorch");
  cmd->add_option("--steps", a->steps, "training steps per configuration")
      ->check(CLI::Range(10, 1000000));
  cmd->add_option("--batch", a->batch, "samples per worker per step")->check(CLI::Range(1, 65536));
  cmd->add_option("--threads", a->threads, "intra-op threads per worker")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--workers", a->workers, "worker counts to run, e.g. --workers 1 2")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--peer", a->peer, "PyTorch peer: auto (both presets), default, tuned, none")
      ->check(CLI::IsMember({"auto", "default", "tuned", "none"}));
  cmd->add_option("--peer-epochs", a->peer_epochs, "epochs the peer trains (its median is taken)");
  cmd->add_option("--repeats", a->repeats,
                  "interleaved rounds over the worker counts; the best of each is reported")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--json", a->json_path, "also write the JSON lines to this file");
  cmd->add_option("--set", a->sets, "extra config overrides for loom's runs");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loom::cli::bench_train_command
